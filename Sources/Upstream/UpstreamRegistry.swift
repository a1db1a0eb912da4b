import GQLMuxVocabulary
import NIOCore

/// Every upstream gqlmuxd talks to, each by its name behind its own ``UpstreamCarriers``: the
/// one owner of every carrier. The daemon drives all of them through this (start, pause,
/// resume, shut down), and the fan-out performs the multiplexer's placements through it
/// (``UpstreamOperations``). gqlmuxd serves one upstream today, named ``defaultName``; an
/// operation's placement then names a carrier of that one.
///
/// Lives on one event loop, as its carriers do.
package final class UpstreamRegistry {
    /// The name of the upstream `[upstream]` configures.
    package static let defaultName = "default"

    package let eventLoop: any EventLoop
    /// Each upstream, by name, in the order they were configured.
    private let entries: [(name: String, carriers: UpstreamCarriers)]

    /// The upstream `[upstream]` configures; its carriers tell every operation's updates to
    /// `updates`.
    package init(_ upstream: PreparedUpstream, eventLoop: any EventLoop, updates: @escaping OperationSink) {
        self.eventLoop = eventLoop
        entries = [(Self.defaultName, UpstreamCarriers(upstream, eventLoop: eventLoop, updates: updates))]
    }

    /// The upstreams' names, in configuration order.
    package var names: [String] { entries.map(\.name) }

    /// The carriers of upstream `name`, if there is one by that name.
    package func carriers(named name: String) -> UpstreamCarriers? {
        entries.first { $0.name == name }?.carriers
    }

    /// The upstream `[upstream]` configures.
    package var primary: UpstreamCarriers { entries[0].carriers }

    /// Every carrier's transport events, with the name of the upstream they concern.
    package func observe(_ observer: @escaping @Sendable (_ upstream: String, _ connection: Int, TransportEvent) -> Void) {
        for (name, carriers) in entries {
            carriers.observer = { connection, event in observer(name, connection, event) }
        }
    }

    // MARK: - Life

    package func start() { for entry in entries { entry.carriers.start() } }

    /// Closes every upstream's subscriptions and holds them until ``resume()``.
    package func pause() { for entry in entries { entry.carriers.pause() } }

    package func resume() { for entry in entries { entry.carriers.resume() } }

    /// Ends every operation of every upstream and closes every connection; done when every
    /// socket is closed.
    package func shutdownOnLoop() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        return .andAllComplete(entries.map { $0.carriers.shutdownOnLoop() }, on: eventLoop)
    }
}

/// What the fan-out asks of the upstream side: send an operation where the multiplexer core
/// placed it, cancel it there, and name the carrier for the journal.
package protocol UpstreamOperations: AnyObject {
    /// Sends operation `id` on the carrier at `placement`; false when there is none.
    func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer, on placement: Placement) -> Bool
    /// The multiplexer no longer wants operation `id`.
    func cancelOnLoop(_ id: OperationID, on placement: Placement)
    /// The carrier's name for the journal (`GQLMUX_TRANSPORT=`).
    func carrierName(at placement: Placement) -> String?
}

/// Placements name carriers of the one upstream there is.
extension UpstreamRegistry: UpstreamOperations {
    package func openOnLoop(_ id: OperationID, kind: OperationKind, payload: ByteBuffer, on placement: Placement) -> Bool {
        primary.openOnLoop(id, kind: kind, payload: payload, on: placement)
    }

    package func cancelOnLoop(_ id: OperationID, on placement: Placement) {
        primary.cancelOnLoop(id, on: placement)
    }

    package func carrierName(at placement: Placement) -> String? {
        primary.carrierName(at: placement)
    }
}
