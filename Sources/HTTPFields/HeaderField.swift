/// One HTTP header as an app presented it, or as it goes upstream: its name and value.
package struct HeaderField: Hashable, Sendable {
    package var name: String
    package var value: String

    package init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}
