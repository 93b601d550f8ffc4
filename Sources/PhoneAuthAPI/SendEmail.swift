import EmulatorSupport
import PhoneAuthCore

// Every out-of-band email — sendOobCode's PASSWORD_RESET, EMAIL_SIGNIN, VERIFY_EMAIL and VERIFY_AND_CHANGE_EMAIL, and
// the RECOVER_EMAIL an email change sends the old address — goes through `PhoneAuthApp.sendEmail`, which decides once
// whether a beforeSendEmail function runs (as `sendSMS` does for beforeSendSms, SignInAndSend.swift). Without one
// the send runs at once; with one the whole send runs on the blocking pool (`BlockingCalls.defer`): the function is
// called first, with no lock held, and only a send it allowed stores its code.

extension PhoneAuthApp {
    /// Runs `send` (which stores the code and answers) after `key`'s beforeSendEmail function, if one is configured,
    /// allowed an email of `type` to `email`. `user`: the account concerned, if any (read only when a function is
    /// configured). A function's error, or its
    /// `recaptchaActionOverride: "BLOCK"`, refuses the request and nothing is stored.
    func sendEmail(_ call: Call, _ key: StoreKey, to email: String, type: OobCode.RequestType, user: @autoclosure () -> UserRecord?,
                   _ send: @escaping @Sendable () throws -> Reply) throws -> Reply {
        guard blocking.anyTrigger(self, key, [.beforeSendEmail]) else { return try send() }
        let user = user()
        return try blocking.defer(self, call) { [self] in
            try blocking.beforeSendEmail(self, call, key, email: email, type: type, user: user)
            return try send()
        }
    }
}
