import GQLMuxVocabulary
import NIOCore
import ResultDelivery

extension ClientSession {
    /// How a client came in, as whoever builds its pipeline says: what the session needs of
    /// its listener and wire without naming either.
    struct Arrival {
        /// The listener it was accepted on (carried over a restart: the one it came in on
        /// before). The control plane's: which table row and which access rules.
        let listener: ClientOrigin
        /// How its wire takes what is written to it.
        let output: ResultWriter.Output
        /// Whether its peer has credentials to read (a Unix socket's; a TCP peer has none).
        let hasPeerCredentials: Bool
        /// How long a client cut for falling behind has to read what was queued before the
        /// error that cut it: 1 s on the line socket, 10 s on the endpoint's listeners (a
        /// WebSocket client reads its close frame, 1008 with the reason, only after all of it;
        /// an HTTP stream its final error). Nothing new is queued meanwhile.
        let drainAfterCut: TimeAmount
        /// `GQLMUX_CLIENT_KIND` in its journal entries (none for the line socket's, as before
        /// the endpoint existed).
        let logKind: String?

        /// A client of `listener` whose wire takes `output`.
        init(_ listener: ClientOrigin, output: ResultWriter.Output) {
            self.listener = listener
            self.output = output
            let line = listener == .lineSocket
            hasPeerCredentials = listener != .endpointTCP
            drainAfterCut = line ? .seconds(1) : .seconds(10)
            logKind = line ? nil : listener.rawValue
        }
    }
}
