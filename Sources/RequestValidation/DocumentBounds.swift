/// Bounds a GraphQL document BEFORE it reaches the (recursive) parser: counts lexical tokens
/// and the deepest nesting of `{`, `[` and `(`, in one linear pass with constant stack.
///
/// The GraphQL parser recurses once or more per nesting level; a document nested 50,000
/// levels deep overflows the event loop thread's stack. This lexer only has to be right
/// about where strings, block strings and comments start and end (brackets inside them do
/// not count); it does not validate: the parser does that afterwards, within bounds.
package struct DocumentBounds: Sendable, Equatable {
    /// Lexical tokens: punctuators, names, numbers and strings (comments and commas excluded).
    package var tokens = 0
    /// Deepest nesting of `{`, `[` and `(` together.
    package var depth = 0

    /// Why a document was refused before parsing.
    package enum Exceeded: Error, Equatable, Sendable {
        case tokens(limit: Int)
        case depth(limit: Int)
    }

    /// Measures `document`, stopping early as soon as a limit is passed, and appends every token
    /// followed by one space to `tokenText` when it is not nil: the document with whitespace,
    /// commas and comments normalised away, in linear time (the dedup key; `GraphQL.print` is
    /// quadratic in depth).
    /// - Throws: ``Exceeded`` naming the first limit passed.
    package static func check(_ document: String, maxTokens: Int, maxDepth: Int, tokenText: inout [UInt8]?) throws(Exceeded) -> DocumentBounds {
        var result = DocumentBounds()
        var text = document
        let outcome = text.withUTF8 { bytes -> Exceeded? in
            do throws(Exceeded) {
                try result.scan(bytes, maxTokens: maxTokens, maxDepth: maxDepth, tokenText: &tokenText)
                return nil
            } catch {
                return error
            }
        }
        if let outcome { throw outcome }
        return result
    }

    private mutating func scan(_ b: UnsafeBufferPointer<UInt8>, maxTokens: Int, maxDepth: Int, tokenText: inout [UInt8]?) throws(Exceeded) {
        var i = 0
        var open = 0
        let n = b.count
        func isNameByte(_ c: UInt8) -> Bool {
            (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x5F
        }
        func isNumberByte(_ c: UInt8) -> Bool {
            (c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x2B || c == 0x2D || c == 0x65 || c == 0x45
        }
        while i < n {
            let c = b[i]
            let start = i
            switch c {
            case 0x20, 0x09, 0x0A, 0x0D, 0x2C:  // whitespace and commas are ignored tokens
                i += 1
                continue
            case 0x23:  // comment to end of line
                while i < n, b[i] != 0x0A, b[i] != 0x0D { i += 1 }
                continue
            case 0x22:  // string or block string
                if i + 2 < n, b[i + 1] == 0x22, b[i + 2] == 0x22 {
                    i += 3
                    while i < n {
                        if b[i] == 0x5C, i + 3 < n, b[i + 1] == 0x22, b[i + 2] == 0x22, b[i + 3] == 0x22 {
                            i += 4
                        } else if b[i] == 0x22, i + 2 < n, b[i + 1] == 0x22, b[i + 2] == 0x22 {
                            i += 3
                            break
                        } else {
                            i += 1
                        }
                    }
                } else {
                    i += 1
                    while i < n, b[i] != 0x22, b[i] != 0x0A {
                        i += b[i] == 0x5C ? 2 : 1
                    }
                    i += 1
                }
            case 0x7B, 0x5B, 0x28:  // { [ (
                open += 1
                if open > depth {
                    depth = open
                    if depth > maxDepth { throw .depth(limit: maxDepth) }
                }
                i += 1
            case 0x7D, 0x5D, 0x29:  // } ] )
                open = max(0, open - 1)
                i += 1
            case 0x2E where i + 2 < n && b[i + 1] == 0x2E && b[i + 2] == 0x2E:  // ...
                i += 3
            default:
                if isNameByte(c) {
                    let numeric = (c >= 0x30 && c <= 0x39)
                    i += 1
                    while i < n, isNameByte(b[i]) || (numeric && isNumberByte(b[i])) { i += 1 }
                } else if c == 0x2D {  // negative number
                    i += 1
                    while i < n, isNumberByte(b[i]) { i += 1 }
                } else {
                    i += 1  // other punctuators and anything the parser will refuse
                }
            }
            tokens += 1
            if tokens > maxTokens { throw .tokens(limit: maxTokens) }
            if tokenText != nil {
                tokenText!.append(contentsOf: UnsafeBufferPointer(rebasing: b[start..<min(i, n)]))
                tokenText!.append(0x20)
            }
        }
    }
}
