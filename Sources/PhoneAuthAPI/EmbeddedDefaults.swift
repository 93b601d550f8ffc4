/// The shipped default configuration, embedded so the binary is useful anywhere (kept identical to
/// `config/emulator.json`; a test checks that).
public enum EmbeddedDefaults {
    public static let configJSON = #"""
{
  "host": "127.0.0.1",
  "port": 9099,
  "projectId": "demo-phone",
  "tokenSigning": "rs256",
  "projects": {
    "demo-phone": {
      "signIn": { "phoneNumber": { "enabled": true, "testPhoneNumbers": { "+16505554567": "123456" } } }
    }
  }
}
"""#
}
