/// What a close code means for reconnection.
package enum CloseCodePolicy {
    /// 4401 Unauthorized, 4403 Forbidden, 4406 Subprotocol not acceptable: the credentials or
    /// the setup are wrong, so retrying cannot help until someone changes them.
    package static let fatalCodes: Set<UInt16> = [4401, 4403, 4406]

    /// True when the transport must stop and wait for a reload, resume or new subscribe.
    package static func isFatal(_ code: UInt16) -> Bool { fatalCodes.contains(code) }
}
