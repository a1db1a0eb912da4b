/// What the daemon tells, and asks, the process that runs it: sd_notify's STATUS and
/// lifecycle in gqlmuxd, the test rig's waits in tests, and how an online restart hands the
/// clients over. Given to ``Daemon/init(configuration:configPath:listeners:eventLoop:events:hooks:)``
/// and never changed after, so nothing outside the daemon's loop writes to it while it runs.
package struct DaemonHooks: Sendable {
    /// The status line changed (at most once per loop turn; called on the loop).
    package var statusChanged: (@Sendable (String) -> Void)?
    /// The daemon is ready, reloading or stopping (READY=1, RELOADING=1, STOPPING=1).
    package var lifecycle: (@Sendable (Daemon.LifecycleChange) -> Void)?
    /// How SIGTERM hands the clients to the next process instead of closing them (systemd's
    /// file descriptor store); nil: every stop closes them and `gqlmuxctl restart` is refused.
    package var onlineRestart: OnlineRestart?

    package init(
        statusChanged: (@Sendable (String) -> Void)? = nil,
        lifecycle: (@Sendable (Daemon.LifecycleChange) -> Void)? = nil,
        onlineRestart: OnlineRestart? = nil
    ) {
        self.statusChanged = statusChanged
        self.lifecycle = lifecycle
        self.onlineRestart = onlineRestart
    }

    /// The online restart's three questions to the service manager.
    package struct OnlineRestart: Sendable {
        /// Where the clients, the listeners and the record go; throws when they cannot (the
        /// clients are then closed as in a stop).
        package var store: Daemon.HandoverStore
        /// At SIGTERM: whether this stop is a restart (the store is kept for the next process),
        /// and why, for the journal.
        package var stopIsRestart: @Sendable () -> (Bool, String)
        /// Ends the service (raises SIGTERM in gqlmuxd), once `gqlmuxctl restart` has answered;
        /// nil: the verb is refused.
        package var requestStop: (@Sendable () -> Void)?

        package init(
            store: @escaping Daemon.HandoverStore,
            stopIsRestart: @escaping @Sendable () -> (Bool, String) = { (true, "SIGTERM") },
            requestStop: (@Sendable () -> Void)? = nil
        ) {
            self.store = store
            self.stopIsRestart = stopIsRestart
            self.requestStop = requestStop
        }
    }
}
