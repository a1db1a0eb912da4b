import Foundation
@_exported import GQLMuxClientCore
import LocalProtocol

// The client's Foundation conveniences: variables as a dictionary, a result as `[String: Any]`.
// They live in this module, above the Foundation-free GQLMuxClientCore, so a program that
// needs only the core (gqlmuxctl) links no Foundation (swift-corelibs-foundation brings ICU,
// about 44 MB in a static binary).

extension GQLMuxClient {
    /// Subscribes (any operation type; subscriptions are shared with identical ones at the daemon).
    /// - Parameters:
    ///   - variables: JSON-compatible values (`String`, numbers, `Bool`, arrays, dictionaries, `NSNull`).
    ///   - replayLast: when this subscription joins one the daemon already shares, receive its
    ///     latest result at once (marked ``GQLMuxResult/replayed``); nil: the daemon's
    ///     `[subscriptions] replay_last`.
    ///   - resnapshot: a query to run each time the stream resumes after an outage (once for every
    ///     subscriber that names the same one); its result comes first, marked
    ///     ``GQLMuxResult/snapshot``, with this subscription's variables.
    ///   - onStateChange: called with each lifecycle state (pending, active, reconnecting, paused).
    public func subscribe(
        query: String,
        variables: [String: any Sendable]? = nil,
        operationName: String? = nil,
        replayLast: Bool? = nil,
        resnapshot: String? = nil,
        upstream: String? = nil,
        onStateChange: (@Sendable (GQLMuxSubscriptionState) -> Void)? = nil
    ) -> GQLMuxSubscription {
        let request: String
        do {
            request = try Self.requestJSON(
                query: query,
                variables: variables,
                operationName: operationName,
                replayLast: replayLast,
                resnapshot: resnapshot
            )
        } catch {
            return failedSubscription(error)
        }
        return subscribe(requestJSON: request, upstream: upstream, onStateChange: onStateChange)
    }

    /// Runs a query and returns its one result.
    public func query(
        _ query: String,
        variables: [String: any Sendable]? = nil,
        operationName: String? = nil,
        upstream: String? = nil
    ) async throws -> GQLMuxResult {
        try await single(requestJSON: try Self.requestJSON(query: query, variables: variables, operationName: operationName), upstream: upstream)
    }

    /// Runs a mutation and returns its one result; it is never retried.
    public func mutate(
        _ mutation: String,
        variables: [String: any Sendable]? = nil,
        operationName: String? = nil,
        upstream: String? = nil
    ) async throws -> GQLMuxResult {
        try await single(requestJSON: try Self.requestJSON(query: mutation, variables: variables, operationName: operationName), upstream: upstream)
    }

    package static func requestJSON(
        query: String,
        variables: [String: any Sendable]?,
        operationName: String?,
        replayLast: Bool? = nil,
        resnapshot: String? = nil
    ) throws -> String {
        var variablesJSON: String?
        if let variables {
            guard JSONSerialization.isValidJSONObject(variables) else {
                throw GQLMuxError(code: LocalErrorCode.badRequest.rawValue, message: "variables are not JSON-compatible")
            }
            let data = try JSONSerialization.data(withJSONObject: variables, options: [.sortedKeys])
            variablesJSON = String(decoding: data, as: UTF8.self)
        }
        return requestJSON(query: query, variablesJSON: variablesJSON, operationName: operationName, replayLast: replayLast, resnapshot: resnapshot)
    }

}

extension GQLMuxResult {
    /// The result as Foundation objects (`[String: Any]`).
    public var object: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any]
    }
}
