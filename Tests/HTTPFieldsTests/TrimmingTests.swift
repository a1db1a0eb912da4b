import HTTPFields
import Testing

/// HTTP's optional whitespace rule, and the same for a file's contents.
@Suite struct TrimmingTests {
    @Test func optionalWhitespaceIsSpaceAndTabAtEitherEndOnly() {
        #expect(" \tBearer  a b\t ".trimming() == "Bearer  a b", "inner whitespace is the value's")
        #expect("value\r\n".trimming() == "value\r\n", "CR and LF are not optional whitespace")
        #expect(" \t ".trimming() == "" && "".trimming() == "")
        #expect("\u{A0}x\u{A0}".trimming() == "\u{A0}x\u{A0}", "no-break space is not HTTP whitespace")
        #expect("é ".trimming() == "é" && " 😀".trimming() == "😀")
    }

    @Test func aFilesContentsAreTrimmedOfNewlinesToo() {
        #expect("secret-token\n".trimming(" \t\r\n") == "secret-token")
        #expect("\r\n  two words \r\n".trimming(" \t\r\n") == "two words")
    }

    @Test func aFieldIsItsNameAndValue() {
        let field = HeaderField(name: "Authorization", value: "Bearer x")
        #expect(field == HeaderField(name: "Authorization", value: "Bearer x"))
        #expect(field != HeaderField(name: "authorization", value: "Bearer x"), "kept as presented: names are compared where they are used")
    }
}
