/// A phone number in canonical E.164 form (`+` and 7–15 digits with an assigned country calling code).
public struct PhoneNumber: Sendable, Hashable, CustomStringConvertible {
    /// `+16505554567`
    public let e164: String
    /// The country calling code, e.g. `1`, `44`, `358`.
    public let callingCode: String

    public var description: String { e164 }

    /// Normalises user input: strips spaces, hyphens, dots and parentheses, then validates.
    /// Errors are Google's exact strings: `INVALID_PHONE_NUMBER : Invalid format.` / `: TOO_SHORT` / `: TOO_LONG`.
    public init(parsing raw: String?) throws(AuthError) {
        guard var raw, !raw.isEmpty, raw.utf8.count <= 64 else { throw AuthError(.invalidPhoneNumber, "Invalid format.") }
        // Fast path: already canonical (`+` and 7–15 digits), which is what SDKs send.
        let canonical = raw.withUTF8 { b in
            b.count >= 8 && b.count <= 16 && b[0] == UInt8(ascii: "+") && b.dropFirst().allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        }
        if canonical {
            guard let cc = CallingCodes.callingCode(prefixOf: raw.utf8.dropFirst()) else { throw AuthError(.invalidPhoneNumber, "Invalid format.") }
            e164 = raw
            callingCode = cc
            return
        }
        var digits: [UInt8] = []
        var sawPlus = false
        for b in raw.utf8 {
            switch b {
            case 0x20, 0x2D, 0x2E, 0x28, 0x29, 0x09: continue
            case UInt8(ascii: "+"):
                guard !sawPlus, digits.isEmpty else { throw AuthError(.invalidPhoneNumber, "Invalid format.") }
                sawPlus = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard sawPlus else { throw AuthError(.invalidPhoneNumber, "Invalid format.") }
                digits.append(b)
            default:
                throw AuthError(.invalidPhoneNumber, "Invalid format.")
            }
        }
        guard sawPlus, !digits.isEmpty else { throw AuthError(.invalidPhoneNumber, "Invalid format.") }
        guard let cc = CallingCodes.callingCode(prefixOf: digits) else { throw AuthError(.invalidPhoneNumber, "Invalid format.") }
        if digits.count < 7 { throw AuthError(.invalidPhoneNumber, "TOO_SHORT") }
        if digits.count > 15 { throw AuthError(.invalidPhoneNumber, "TOO_LONG") }
        e164 = String(decoding: [UInt8(ascii: "+")] + digits, as: UTF8.self)
        callingCode = cc
    }

    /// The ISO 3166 region of the number (NANP numbers resolved by area code), or nil for non-geographic codes.
    public var region: String? { CallingCodes.region(e164: e164, callingCode: callingCode) }
}

/// Assigned ITU-T E.164 country calling codes and their main regions.
public enum CallingCodes {
    static let regions: [String: String] = [
        "1": "US", "7": "RU",
        "20": "EG", "27": "ZA", "30": "GR", "31": "NL", "32": "BE", "33": "FR", "34": "ES", "36": "HU", "39": "IT",
        "40": "RO", "41": "CH", "43": "AT", "44": "GB", "45": "DK", "46": "SE", "47": "NO", "48": "PL", "49": "DE",
        "51": "PE", "52": "MX", "53": "CU", "54": "AR", "55": "BR", "56": "CL", "57": "CO", "58": "VE",
        "60": "MY", "61": "AU", "62": "ID", "63": "PH", "64": "NZ", "65": "SG", "66": "TH",
        "81": "JP", "82": "KR", "84": "VN", "86": "CN",
        "90": "TR", "91": "IN", "92": "PK", "93": "AF", "94": "LK", "95": "MM", "98": "IR",
        "211": "SS", "212": "MA", "213": "DZ", "216": "TN", "218": "LY", "220": "GM", "221": "SN", "222": "MR",
        "223": "ML", "224": "GN", "225": "CI", "226": "BF", "227": "NE", "228": "TG", "229": "BJ", "230": "MU",
        "231": "LR", "232": "SL", "233": "GH", "234": "NG", "235": "TD", "236": "CF", "237": "CM", "238": "CV",
        "239": "ST", "240": "GQ", "241": "GA", "242": "CG", "243": "CD", "244": "AO", "245": "GW", "246": "IO",
        "247": "AC", "248": "SC", "249": "SD", "250": "RW", "251": "ET", "252": "SO", "253": "DJ", "254": "KE",
        "255": "TZ", "256": "UG", "257": "BI", "258": "MZ", "260": "ZM", "261": "MG", "262": "RE", "263": "ZW",
        "264": "NA", "265": "MW", "266": "LS", "267": "BW", "268": "SZ", "269": "KM", "290": "SH", "291": "ER",
        "297": "AW", "298": "FO", "299": "GL",
        "350": "GI", "351": "PT", "352": "LU", "353": "IE", "354": "IS", "355": "AL", "356": "MT", "357": "CY",
        "358": "FI", "359": "BG", "370": "LT", "371": "LV", "372": "EE", "373": "MD", "374": "AM", "375": "BY",
        "376": "AD", "377": "MC", "378": "SM", "379": "VA", "380": "UA", "381": "RS", "382": "ME", "383": "XK",
        "385": "HR", "386": "SI", "387": "BA", "389": "MK", "420": "CZ", "421": "SK", "423": "LI",
        "500": "FK", "501": "BZ", "502": "GT", "503": "SV", "504": "HN", "505": "NI", "506": "CR", "507": "PA",
        "508": "PM", "509": "HT", "590": "GP", "591": "BO", "592": "GY", "593": "EC", "594": "GF", "595": "PY",
        "596": "MQ", "597": "SR", "598": "UY", "599": "CW",
        "670": "TL", "672": "NF", "673": "BN", "674": "NR", "675": "PG", "676": "TO", "677": "SB", "678": "VU",
        "679": "FJ", "680": "PW", "681": "WF", "682": "CK", "683": "NU", "685": "WS", "686": "KI", "687": "NC",
        "688": "TV", "689": "PF", "690": "TK", "691": "FM", "692": "MH",
        "800": "", "808": "", "850": "KP", "852": "HK", "853": "MO", "855": "KH", "856": "LA", "870": "", "878": "",
        "880": "BD", "881": "", "882": "", "883": "", "886": "TW", "888": "",
        "960": "MV", "961": "LB", "962": "JO", "963": "SY", "964": "IQ", "965": "KW", "966": "SA", "967": "YE",
        "968": "OM", "970": "PS", "971": "AE", "972": "IL", "973": "BH", "974": "QA", "975": "BT", "976": "MN",
        "977": "NP", "979": "", "992": "TJ", "993": "TM", "994": "AZ", "995": "GE", "996": "KG", "998": "UZ",
    ]

    /// NANP area codes outside the US.
    static let nanpAreaRegions: [String: String] = {
        var m: [String: String] = [:]
        let canada = "204 226 236 249 250 257 263 289 306 343 354 365 367 368 382 387 403 416 418 428 431 437 438 450 460 468 474 506 514 519 548 579 581 584 587 600 604 613 639 647 672 683 705 709 742 753 778 780 782 807 819 825 867 873 879 902 905 942"
        for a in canada.split(separator: " ") { m[String(a)] = "CA" }
        let others: [(String, String)] = [
            ("242", "BS"), ("246", "BB"), ("264", "AI"), ("268", "AG"), ("284", "VG"), ("340", "VI"), ("345", "KY"),
            ("441", "BM"), ("473", "GD"), ("649", "TC"), ("658", "JM"), ("876", "JM"), ("664", "MS"), ("670", "MP"),
            ("671", "GU"), ("684", "AS"), ("721", "SX"), ("758", "LC"), ("767", "DM"), ("784", "VC"), ("787", "PR"),
            ("939", "PR"), ("809", "DO"), ("829", "DO"), ("849", "DO"), ("868", "TT"), ("869", "KN"),
        ]
        for (a, r) in others { m[a] = r }
        return m
    }()

    /// Assigned calling codes by integer value (1-, 2- and 3-digit codes occupy disjoint ranges).
    static let assigned: [Int: String] = Dictionary(uniqueKeysWithValues: regions.keys.map { (Int($0)!, $0) })

    /// The assigned calling code that `digits` starts with, if any.
    public static func callingCode(prefixOf digits: String) -> String? { callingCode(prefixOf: digits.utf8) }

    public static func callingCode<C: Collection>(prefixOf digits: C) -> String? where C.Element == UInt8 {
        var value = 0
        var width = 0
        for b in digits.prefix(3) {
            value = value * 10 + Int(b &- 0x30)
            width += 1
            if let code = assigned[value], code.utf8.count == width { return code }
        }
        return nil
    }

    static func region(e164: String, callingCode: String) -> String? {
        let national = e164.dropFirst(1 + callingCode.count)
        if callingCode == "1" {
            return nanpAreaRegions[String(national.prefix(3))] ?? "US"
        }
        if callingCode == "7", let f = national.first, f == "6" || f == "7" { return "KZ" }
        guard let r = regions[callingCode], !r.isEmpty else { return nil }
        return r
    }
}
