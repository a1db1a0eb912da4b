/// The sessions of the clients connected now, by identity: the daemon adds and removes them,
/// and its memory budget measures them and cuts the one furthest behind. One table, made
/// before both, so neither is told of the other after it is made.
///
/// Not `Sendable`: used on the daemon's loop only.
final class LiveSessions {
    private var byIdentity: [ObjectIdentifier: ClientSession] = [:]

    var values: Dictionary<ObjectIdentifier, ClientSession>.Values { byIdentity.values }
    var count: Int { byIdentity.count }

    subscript(_ identity: ObjectIdentifier) -> ClientSession? {
        get { byIdentity[identity] }
        set { byIdentity[identity] = newValue }
    }

    @discardableResult
    func removeValue(forKey identity: ObjectIdentifier) -> ClientSession? {
        byIdentity.removeValue(forKey: identity)
    }
}

@available(*, unavailable)
extension LiveSessions: Sendable {}
