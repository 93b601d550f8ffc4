/// The version both executables report (`phone-auth-emulator --version`, `phone-auth --version`, `GET /`).
public enum ProductVersion {
    public static let string = "0.1.0"
}
