import EmulatorSupport

// # Federated sign-in (`accounts:signInWithIdp`)
//
// The handler (PhoneAuthAPI/SignInWithIdp.swift) turns the credential — an unsigned JWT or JSON claims as the
// official emulator's tests pass them, a SAML response — into an `IdpProfile`; this file decides whose account it
// is, as production and the official emulator do (one account per email unless `signIn.allowDuplicateEmails`):
//
// - with an ID token (link): the identity joins that user — unless another user holds it
//   (`FEDERATED_USER_ID_ALREADY_LINKED`, even the same user, as the official emulator) or, one account per email,
//   another user has the provider's email (`EMAIL_EXISTS`); a user without an email takes the provider's;
// - else the user the identity is linked to signs in (its entry refreshed from the latest claims);
// - else, one account per email, the user with the provider's email: when the provider vouches for the email
//   (`email_verified`), that user gains the identity and its profile (a takeover of an unverified email also drops
//   the password and the phone number, and revokes the user's tokens, so whoever set them loses the account); when
//   it does not, nothing changes and the answer asks the client to sign in the known way first (`needConfirmation`);
// - else a new user with the provider's profile (and its email, one account per email); `autoCreate: false` (the
//   SDKs' reauthenticate) is `USER_NOT_FOUND` instead, as production.
//
// An enrolled user's identity is saved and the sign-in then owes the second factor (no functions, no tokens yet).

/// What a federated credential says about its user, as the handler derived it.
public struct IdpProfile: Sendable, Equatable {
    /// Lower-case (`google.com`, `oidc.x`, `saml.y`).
    public var providerId: String
    /// The provider's id of the user (`sub`).
    public var rawId: String
    public var displayName: String?
    public var photoUrl: String?
    public var screenName: String?
    /// Lower-case (a SAML response's name id: as given).
    public var email: String?
    /// Whether the provider vouches for `email`.
    public var emailVerified: Bool

    public init(providerId: String, rawId: String, displayName: String? = nil, photoUrl: String? = nil, screenName: String? = nil,
                email: String? = nil, emailVerified: Bool = false) {
        self.providerId = providerId
        self.rawId = rawId
        self.displayName = displayName
        self.photoUrl = photoUrl
        self.screenName = screenName
        self.email = email
        self.emailVerified = emailVerified
    }

    /// The identity as it is linked to the user (`federatedId` holds the raw id, as production stores it).
    public var entry: ProviderUserInfo {
        ProviderUserInfo(providerId: providerId, rawId: rawId, federatedId: rawId, displayName: displayName, photoUrl: photoUrl,
                         email: email, screenName: screenName)
    }
}

extension SignInRequest {
    /// A federated credential, parsed and checked by the handler.
    public struct Idp: Sendable {
        public var profile: IdpProfile
        /// The verified identity of the request's `idToken` (link).
        public var tokenUser: TokenIdentity?
        /// False (the SDKs' reauthenticate): no account is created.
        public var autoCreate: Bool
        public var clientIP: String?
        /// What blocking functions receive besides the user.
        public var credential: FederatedCredential

        public init(profile: IdpProfile, tokenUser: TokenIdentity?, autoCreate: Bool = true, clientIP: String? = nil,
                    credential: FederatedCredential = FederatedCredential()) {
            self.profile = profile
            self.tokenUser = tokenUser
            self.autoCreate = autoCreate
            self.clientIP = clientIP
            self.credential = credential
        }
    }
}

extension SignInRequest.Idp: SignInMethod {
    /// The user as the sign-in would save it (identity linked, fields changed, not yet its login time).
    struct Decision {
        var user: UserRecord
        var isNew: Bool
        /// The provider's identity was not on the user before (`user.linked`).
        var linked: Bool
        /// The user was found by its email and had another identity of the same provider.
        var emailRecycled: Bool
    }

    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<Decision> {
        try decide(e, &tx, now: now, planned: nil)
    }

    /// Resolves the account from the store as it is now. `planned`: the commit's re-check after the functions — a new
    /// user keeps the uid and creation time they saw, and is not counted again.
    private func decide(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, planned: Decision?) throws(AuthError) -> SignInStep<Decision> {
        try tx.checkTenantEnabled()
        try tx.store.config.checkProviderEnabled(profile.providerId)
        let p = profile
        let oneAccountPerEmail = !tx.store.config.allowDuplicateEmails
        let holder = tx.store.user(providerId: p.providerId, rawId: p.rawId)
        var user: UserRecord
        var emailRecycled = false
        if let tokenUser {
            guard let u = tx.store.users[tokenUser.localId] else { throw AuthError(.userNotFound) }
            guard !u.disabled else { throw AuthError(.userDisabled) }
            if holder != nil { throw AuthError(.federatedUserIdAlreadyLinked) }
            user = u
            if oneAccountPerEmail, let email = p.email {
                if let owner = tx.store.user(email: email), owner.localId != user.localId { throw AuthError(.emailExists) }
                if user.email == nil {
                    user.email = email
                    user.emailVerified = p.emailVerified
                }
            }
            if let email = p.email, p.emailVerified, user.email == email { user.emailVerified = true }
        } else if let u = holder {
            user = u
        } else if oneAccountPerEmail, let email = p.email, let owner = tx.store.user(email: email) {
            guard p.emailVerified else {
                return .done(.needConfirmation(localId: owner.localId, verifiedProviders: owner.hasProviders
                    ? owner.providerUserInfo.map(\.providerId) : nil))
            }
            user = owner
            emailRecycled = user.providerUserInfo.contains { $0.providerId == p.providerId && $0.rawId != p.rawId }
            if !user.emailVerified {
                // Whoever set the password or the number never proved the email: they lose the account.
                user.setPassword(hash: nil, salt: nil, algorithm: nil)
                user.phoneNumber = nil
                user.validSince = now / 1000
            }
            user.displayName = p.displayName
            user.photoUrl = p.photoUrl
            user.screenName = p.screenName
            user.emailVerified = true
        } else {
            guard autoCreate else { throw AuthError(.userNotFound) }
            if let planned, planned.isNew {
                user = planned.user
                guard tx.store.users[user.localId] == nil else { throw AuthError(.duplicateLocalId) }
                if let full = e.userQuotaError(userCount: tx.store.users.count) { throw full }
            } else {
                if let full = e.userQuotaError(userCount: tx.store.users.count) { throw full }
                try e.countAccountCreation(&tx, clientIP: clientIP, now: now)
                user = UserRecord(localId: e.newUserID(in: tx.store.users), createdAt: now)
                user.tenantId = tx.key.tenantId
                user.displayName = p.displayName
                user.photoUrl = p.photoUrl
                user.screenName = p.screenName
                if oneAccountPerEmail, let email = p.email {
                    user.email = email
                    user.emailVerified = p.emailVerified
                }
            }
            user.link(p.entry)
            return .proceed(Decision(user: user, isNew: true, linked: true, emailRecycled: false))
        }
        guard !user.disabled else { throw AuthError(.userDisabled) }
        let linked = !user.providerUserInfo.contains { $0.providerId == p.providerId && $0.rawId == p.rawId }
        user.link(p.entry)
        if let planned, planned.user.localId != user.localId || planned.isNew {
            // Another sign-in changed whose identity this is while the functions ran.
            throw AuthError(.federatedUserIdAlreadyLinked)
        }
        // An enrolled user's identity is saved before the second factor (the official emulator's order): no
        // functions, no tokens, no login time yet.
        let first = e.passFirstFactor(&tx, user: user, signInProvider: p.providerId)
        if case .mfaRequired = first {
            save(&tx, user, isNew: false, linked: linked)
            return .done(.secondFactorRequired(user: user, first))
        }
        return .proceed(Decision(user: user, isNew: false, linked: linked, emailRecycled: emailRecycled))
    }

    func candidate(_ d: Decision) -> SignInCandidate? {
        SignInCandidate(user: d.user, isNew: d.isNew, method: .provider(profile.providerId), federated: credential)
    }

    /// Saves the user and a new refresh token. After the functions, first resolves the account again (another
    /// sign-in may have taken the identity or the email, or disabled the user) and applies their changes: a user they
    /// disabled is saved disabled and the sign-in is `USER_DISABLED`.
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming Decision, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        var d = decision
        if let changes {
            switch try decide(e, &tx, now: now, planned: d) {
            case .proceed(let fresh): d = fresh
            case .done(let outcome): return outcome
            }
            changes.apply(to: &d.user)
            if d.user.disabled {
                save(&tx, d.user, isNew: d.isNew, linked: d.linked)
                throw AuthError(.userDisabled)
            }
        }
        d.user.lastLoginAt = now
        d.user.lastRefreshAt = now
        save(&tx, d.user, isNew: d.isNew, linked: d.linked)
        var outcome = e.issueSession(&tx, d.user, isNew: d.isNew, provider: profile.providerId, authTime: now / 1000)
        if d.emailRecycled, case .signedIn(var s) = outcome {
            s.emailRecycled = true
            outcome = .signedIn(s)
        }
        return outcome
    }

    /// Saves `user`: `user.created` with the provider for a new one; else what changed and `user.linked` for a new
    /// identity.
    private func save(_ tx: inout StoreTransaction, _ user: UserRecord, isNew: Bool, linked: Bool) {
        let before = tx.save(user)
        if isNew {
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: profile.providerId))
            return
        }
        if let before { tx.emitUserChanges(from: before, to: user) }
        if linked { tx.emit(.userLinked(uid: user.localId, provider: profile.providerId)) }
    }
}

extension UserRecord {
    /// The user has some provider on the wire (`password`, `phone` or a federated one).
    var hasProviders: Bool {
        phoneNumber != nil || (email != nil && (passwordHash != nil || emailLinkSignin)) || !providerUserInfo.isEmpty
    }
}
