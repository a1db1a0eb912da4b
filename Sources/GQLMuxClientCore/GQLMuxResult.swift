#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One GraphQL execution result, exactly as the upstream sent it.
public struct GQLMuxResult: Sendable, Hashable, CustomStringConvertible {
    /// The ExecutionResult as JSON text (`{"data":…,"errors":…}`).
    public let json: String
    /// The daemon gave this result again: the shared subscription's latest, to a subscriber
    /// that joined after it and asked (`replayLast`).
    public let replayed: Bool
    /// The result of the query this subscription named for its stream's resumes
    /// (`resnapshot`): the current state, right after a gap, before the stream's next results.
    public let snapshot: Bool

    /// A result from its JSON text.
    public init(json: String, replayed: Bool = false, snapshot: Bool = false) {
        self.json = json
        self.replayed = replayed
        self.snapshot = snapshot
    }

    /// The JSON text.
    public var description: String { json }

    /// Decodes the whole result (`{"data":…,"errors":…}`) into `T`.
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(json.utf8))
    }
}

/// Lifecycle of a subscription as the daemon reports it.
public enum GQLMuxSubscriptionState: String, Sendable {
    case pending, active, reconnecting, paused, finished
}
