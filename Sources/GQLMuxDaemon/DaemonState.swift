import GQLMuxConfiguration
import GQLMuxVocabulary
import NIOCore

/// What the daemon listens on: its listeners once bound or adopted, where they are, how many
/// connections each holds against its limit, and the journal limits of their floods. Read and
/// written on the daemon's loop only (what other threads read, the metrics listener's address
/// and its binding, stays on the daemon as constants).
struct Listening {
    /// The line socket's listener.
    var serverChannel: (any Channel)?
    /// The GraphQL endpoint's listeners (Unix socket, loopback TCP).
    var endpointChannels: [any Channel] = []
    /// Its Unix socket file, when this process created it.
    var endpointSocketFile: String?
    /// Where the endpoint listens, for `status` and the started event.
    var endpointAddresses: [String] = []
    /// Where `GET /metrics` is served (`[metrics] listen`, its port resolved), for `status`.
    var metricsAddress: String?
    /// Whether this process created the socket file (an adopted one belongs to systemd).
    var ownsSocketFile = true
    /// Open connections of each listener (``Daemon/admitConnection``).
    var connectionCounts: [ClientOrigin: Int] = [:]
    /// Each listener's connection limit within the open-file limit (made again at each reload).
    var descriptorPlan: DescriptorPlan
    /// Once-a-second journal limits: a full listener, a failing accept, and each kind of endpoint
    /// refusal from each sender (by listener, reason, Host and Origin).
    var listenerFullLog = LogLimiter<ClientOrigin>()
    var acceptFailureLog = LogLimiter<ClientOrigin>()
    var refusalLog = LogLimiter<String>()

    init(descriptorPlan: DescriptorPlan) {
        self.descriptorPlan = descriptorPlan
    }
}

/// Where the daemon is in its run. Read and written on the daemon's loop only.
struct RunState {
    /// The stop has begun: nothing new is accepted.
    var stopping = false
    /// `gqlmuxctl restart` asked for this stop: the clients are handed over whatever the
    /// service manager is doing, and gqlmuxd exits with ``Daemon/restartExitCode``.
    var restartRequested = false
    /// Set while a carried client resumes its subscriptions: the identity lanes it held in the
    /// previous process are made again at once, not paced as new ones (``UpstreamRegistry``).
    var resumingCarriedClient = false
    /// A status line is due at the end of this loop turn.
    var statusScheduled = false
    /// The last reload's error, shown in STATUS and `status` until a reload succeeds.
    var reloadError: String?
    /// The reload in progress, if any: the next one starts after it, so two never interleave.
    var lastReload: EventLoopFuture<Void>?
}
