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

static inline int copenssl_BN_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }
static inline long copenssl_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline void copenssl_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline int copenssl_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline EVP_PKEY *copenssl_EVP_RSA_gen(unsigned int bits) { return EVP_RSA_gen(bits); }

#endif
