extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace; list items in flags and headers).
    public func trimmingSpaces() -> String {
        var s = self[...]
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }

    /// Without leading and trailing whitespace, newlines included (typed input, pasted tokens).
    public func trimmingWhitespace() -> String {
        var s = self[...]
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
