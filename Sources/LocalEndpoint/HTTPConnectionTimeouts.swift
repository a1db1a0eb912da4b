import GQLMuxVocabulary

/// The deadlines of one HTTP connection to the endpoint, so a peer that connects and stalls
/// (or trickles its headers or body a byte at a time) cannot hold a connection for ever. Pure:
/// every event carries `now`; the I/O side arms a timer at ``deadline`` and calls ``expired(at:)``.
///
/// States: `awaitingHead` (from the connect, or from the first byte after an idle spell) →
/// `readingBody` (the head is in) → `busy` (the request is whole: the answer is being made or
/// streamed; no deadline, the operation's own timeout applies) → `idle` (the answer ended,
/// keep-alive) → `awaitingHead` on the next byte.
package struct HTTPConnectionTimeouts: Sendable {
    package struct Limits: Sendable, Equatable {
        /// From the connect (or the first byte of a request) until its head is complete.
        package var header: Duration = .seconds(10)
        /// From the head until the body is complete.
        package var body: Duration = .seconds(30)
        /// Between an answer's end and the next request's first byte.
        package var keepAlive: Duration = .seconds(60)
        package init() {}
    }

    /// Which deadline passed.
    package enum Timeout: String, Sendable, Equatable {
        case header, body, keepAlive = "keep_alive"
    }

    private enum Phase: Equatable {
        case awaitingHead(since: Instant)
        case readingBody(since: Instant)
        case busy
        case idle(since: Instant)
    }

    private var phase: Phase
    package let limits: Limits

    /// A connection accepted at `now`: its first request's head is awaited.
    package init(connectedAt now: Instant, limits: Limits = Limits()) {
        self.limits = limits
        phase = .awaitingHead(since: now)
    }

    /// Bytes arrived: the first byte after an idle spell starts the header deadline.
    package mutating func bytesArrived(at now: Instant) {
        if case .idle = phase { phase = .awaitingHead(since: now) }
    }

    /// A request head is complete.
    package mutating func headReceived(at now: Instant) {
        phase = .readingBody(since: now)
    }

    /// The request is complete; its answer is on the way.
    package mutating func requestEnded() {
        phase = .busy
    }

    /// The answer ended and the connection stays open for the next request.
    package mutating func responseEnded(at now: Instant) {
        if phase == .busy { phase = .idle(since: now) }
    }

    /// When the current deadline passes, and which it is; nil while an answer is being made.
    package var deadline: (at: Instant, timeout: Timeout)? {
        switch phase {
        case .awaitingHead(let since): (since + limits.header, .header)
        case .readingBody(let since): (since + limits.body, .body)
        case .idle(let since): (since + limits.keepAlive, .keepAlive)
        case .busy: nil
        }
    }

    /// The deadline that has passed at `now`, if any: the connection is then closed.
    package func expired(at now: Instant) -> Timeout? {
        guard let deadline, now >= deadline.at else { return nil }
        return deadline.timeout
    }
}
