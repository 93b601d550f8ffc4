#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H

#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/bio.h>
#include <openssl/param_build.h>
#include <openssl/hmac.h>
#include <openssl/ec.h>

static inline int copenssl_BN_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }
static inline long copenssl_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline void copenssl_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline EVP_PKEY *copenssl_EVP_RSA_gen(unsigned int bits) { return EVP_RSA_gen(bits); }

/// Builds an RSA public key from big-endian n and e (the OSSL_PARAM key names must outlive the builder, so this
/// stays in C where they are static strings).
static inline EVP_PKEY *copenssl_rsa_public_from_ne(const unsigned char *n, int nlen, const unsigned char *e, int elen) {
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    BIGNUM *bn = BN_bin2bn(n, nlen, NULL), *be = BN_bin2bn(e, elen, NULL);
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    if (!bld || !bn || !be) goto done;
    if (!OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) || !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be)) goto done;
    params = OSSL_PARAM_BLD_to_param(bld);
    ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) != 1) goto done;
    if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) pkey = NULL;
done:
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    return pkey;
}

/// A new P-256 key pair (`EVP_EC_gen` is a variadic macro Swift cannot call).
static inline EVP_PKEY *copenssl_ec_p256_generate(void) { return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256"); }

/// DER `ECDSA-Sig-Value` → JWS `r || s` (each `half` bytes, big-endian, left-padded); 1 on success.
static inline int copenssl_ecdsa_der_to_raw(const unsigned char *der, long derlen, unsigned char *out, int half) {
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, derlen);
    if (!sig) return 0;
    const BIGNUM *r = NULL, *s = NULL;
    ECDSA_SIG_get0(sig, &r, &s);
    int ok = BN_bn2binpad(r, out, half) == half && BN_bn2binpad(s, out + half, half) == half;
    ECDSA_SIG_free(sig);
    return ok;
}

/// JWS `r || s` → DER (allocated with OPENSSL_malloc: free with `copenssl_OPENSSL_free`); its length, or 0.
static inline int copenssl_ecdsa_raw_to_der(const unsigned char *raw, int half, unsigned char **der) {
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(raw, half, NULL), *s = BN_bin2bn(raw + half, half, NULL);
    if (!sig || !r || !s || ECDSA_SIG_set0(sig, r, s) != 1) { ECDSA_SIG_free(sig); BN_free(r); BN_free(s); return 0; }
    *der = NULL;
    int n = i2d_ECDSA_SIG(sig, der);
    ECDSA_SIG_free(sig);
    return n > 0 ? n : 0;
}

#endif
