/// A key `top` reads from the terminal.
enum TopKey: Equatable {
    case character(Character)
    case tab
    case left
    case right
    /// Any other escape sequence (a function key, an arrow up or down): ignored.
    case other
}

/// Bytes typed → keys. Arrow keys come as `ESC [ C` (or `ESC O C`); a sequence split across
/// reads is carried over to the next. Pure.
struct KeyDecoder {
    private enum Stage {
        case ground
        /// After ESC.
        case escape
        /// After `ESC [` or `ESC O`: parameters until a final byte.
        case sequence
    }

    private var stage = Stage.ground
    private var utf8: [UInt8] = []

    mutating func feed(_ bytes: some Sequence<UInt8>) -> [TopKey] {
        var keys: [TopKey] = []
        for byte in bytes {
            switch stage {
            case .ground:
                if byte == 0x1B {
                    stage = .escape
                } else if byte == 0x09 {
                    keys.append(.tab)
                } else if byte < 0x80 {
                    utf8 = []
                    keys.append(.character(Character(Unicode.Scalar(byte))))
                } else {
                    // A multi-byte character: whole when it decodes.
                    utf8.append(byte)
                    if let text = String(validating: utf8, as: UTF8.self), let character = text.first {
                        keys.append(.character(character))
                        utf8 = []
                    } else if utf8.count >= 4 {
                        utf8 = []
                    }
                }
            case .escape:
                if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "O") {
                    stage = .sequence
                } else if byte == 0x1B {
                    keys.append(.other)  // ESC ESC: the first was a lone Escape.
                } else {
                    stage = .ground
                    keys.append(.other)  // Alt + a key.
                }
            case .sequence:
                guard (0x40...0x7E).contains(byte) else { continue }
                stage = .ground
                switch byte {
                case UInt8(ascii: "C"): keys.append(.right)
                case UInt8(ascii: "D"): keys.append(.left)
                default: keys.append(.other)
                }
            }
        }
        return keys
    }

    /// A lone Escape is pending (nothing followed it within one read).
    var pendingEscape: Bool { stage == .escape }

    /// Forgets a pending lone Escape.
    mutating func flushEscape() {
        if stage == .escape { stage = .ground }
    }
}
