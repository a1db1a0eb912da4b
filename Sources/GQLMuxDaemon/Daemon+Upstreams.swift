import GQLMuxConfiguration
import GQLMuxVocabulary
import HTTPFields
import LocalEndpoint
import LocalProtocol
import NIOCore
import RequestValidation
import SystemdSupport
import Upstream

/// Why a client may not use an upstream: an error for that operation only.
struct LaneRefusal: Error {
    var code: LocalErrorCode
    var message: String
}

/// The table of upstreams as the daemon serves it: which lane a client's operation goes to
/// (its upstream by name, and the identity the upstream asks for), and what operators see of
/// each upstream.
extension Daemon {
    /// The registry's definitions of `configuration`'s upstreams, their file I/O done
    /// (blocking: the CA files).
    static func definitions(_ configuration: DaemonConfiguration, checkPayloadFile: Bool) throws -> [UpstreamRegistry.Definition] {
        try configuration.upstreams.map { entry in
            let prepared: PreparedUpstream
            do {
                prepared = try PreparedUpstream(entry.upstream, checkPayloadFile: checkPayloadFile)
            } catch {
                guard entry.name != NamedUpstream.defaultName else { throw error }
                throw DaemonError("[upstreams.\(entry.name)]: \(error)")
            }
            return UpstreamRegistry.Definition(name: entry.name, prepared: prepared, layout: entry.layout, perCredential: entry.identity != .host)
        }
    }

    /// The lane of upstream `name` (nil: `default`) for `session`'s operations: the upstream's
    /// one lane, or the lane of the credential `session` presents (`identity = "client"`) or its
    /// peer's uid or gid names (`"peer"`). A new lane takes its layout here.
    func lane(upstream name: String?, for session: ClientSession) -> Result<LaneID, LaneRefusal> {
        eventLoop.assertInEventLoop()
        let name = name ?? NamedUpstream.defaultName
        guard let entry = configuration.upstream(named: name) else {
            return .failure(LaneRefusal(code: .unknownUpstream, message: "no upstream is named '\(name.prefix(64))'"))
        }
        var credential: LaneCredential?
        // What the client presents, for a lane its credential picks (kept by the session for a restart).
        var picking: PresentedCredential?
        switch entry.identity {
        case .host:
            break
        case .client(let forward):
            if let refusal = session.presentedCredentials.refusal { return .failure(LaneRefusal(code: .limitExceeded, message: refusal)) }
            picking = session.presented
            switch Self.credential(session.presented, forwarding: forward, keepingOut: configuration.graphqlEndpoint.token) {
            case .success(let own): credential = own
            case .failure(let refusal): return .failure(refusal)
            }
            // AppSync reads an app's own key or token from one header: without it there is
            // nothing to send (never the host's), so the app is told at once.
            if let header = entry.upstream.appSync?.auth.presentedHeader, credential?.headers.contains(where: { $0.name == header }) != true {
                return .failure(
                    LaneRefusal(code: .forbidden, message: "upstream '\(name)' (AppSync, identity = \"client\") needs the app's own \(header) header")
                )
            }
        case .peer(let table):
            guard session.arrival.listener != .endpointTCP, let peer = session.credentials else {
                return .failure(
                    LaneRefusal(code: .forbidden, message: "upstream '\(name)' serves local users by their uid (identity = \"peer\"); a TCP client has none")
                )
            }
            guard let file = table.payloadFile(uid: peer.uid, gid: peer.gid) else {
                return .failure(LaneRefusal(code: .forbidden, message: "upstream '\(name)' has no credentials for uid \(peer.uid) ([upstreams.\(name).peers])"))
            }
            credential = LaneCredential(payload: .file(file))
        }
        if let credential, let refusal = identityCapRefusal(upstream: name, credential: credential, for: session) { return .failure(refusal) }
        switch upstreams.choose(upstream: name, credential: credential, paced: !run.resumingCarriedClient) {
        case .unknownUpstream:
            return .failure(LaneRefusal(code: .unknownUpstream, message: "no upstream is named '\(name.prefix(64))'"))
        case .tooManyIdentities(let limit):
            events.emit(
                .limitExceeded,
                session.fields(["GQLMUX_LIMIT": "max_identities", "GQLMUX_UPSTREAM": name]),
                message: "max_identities (\(limit)) reached"
            )
            return .failure(LaneRefusal(code: .limitExceeded, message: "max_identities (\(limit)) identities have upstream connections"))
        case .lane(let id, let layout):
            if let layout { switchboard.setLayout(layout, of: id) }
            if credential != nil, session.holdLane(id, presented: picking) { upstreams.hold(id) }  // identity lanes only
            return .success(id)
        }
    }

    /// `[limits] max_identities_per_uid`: a lane `session`'s uid does not hold yet is refused
    /// when that uid's clients hold that many identity lanes already (TCP clients are one peer),
    /// so one user's apps cannot take every identity.
    private func identityCapRefusal(upstream name: String, credential: LaneCredential, for session: ClientSession) -> LaneRefusal? {
        let peer = session.arrival.listener == .endpointTCP ? nil : session.credentials?.uid
        let sameUser = sessions.values.filter { ($0.arrival.listener == .endpointTCP ? nil : $0.credentials?.uid) == peer }
        let held = sameUser.reduce(into: Set<LaneID>()) { $0.formUnion($1.presentedCredentials.heldLanes) }
        if let existing = upstreams.identityLane(upstream: name, credential: credential), held.contains(existing) { return nil }
        let cap = configuration.limits.maxIdentitiesPerUID
        guard held.count >= cap else { return nil }
        let who = peer.map { "uid \($0)" } ?? "the endpoint's TCP clients"
        events.emit(
            .limitExceeded,
            session.fields(["GQLMUX_LIMIT": "max_identities_per_uid", "GQLMUX_UPSTREAM": name]),
            message: "max_identities_per_uid (\(cap)) reached by \(who)"
        )
        return LaneRefusal(code: .limitExceeded, message: "max_identities_per_uid (\(cap)): \(who) holds that many identities already")
    }

    /// What a client presented, as its upstream credential: its payload, and its headers named
    /// in `forward_headers`. The endpoint's token never goes upstream, whatever carried it: a
    /// header holding it is not forwarded, a payload's members holding it are left out, and a
    /// payload holding it anywhere else is refused.
    static func credential(
        _ presented: PresentedCredential,
        forwarding forward: [String],
        keepingOut token: EndpointToken?
    ) -> Result<LaneCredential, LaneRefusal> {
        var payload = presented.payload
        if let token, let bytes = payload {
            switch token.redacting(payload: bytes) {
            case .unchanged: break
            case .without(let rest): payload = rest
            case .refused(let member):
                return .failure(
                    LaneRefusal(
                        code: .forbidden,
                        message: "the connection_init payload carries the endpoint's token inside '\(member.prefix(64))'; it is never sent upstream"
                    )
                )
            }
        }
        let headers = presented.headers.filter { header in
            forward.contains(header.name.lowercased()) && token?.occurs(in: Array(header.value.utf8)) != true
        }
        return .success(LaneCredential(payload: payload.map { .inline($0) } ?? .configured, headers: headers))
    }

    /// A client no longer uses identity lane `lane`: its last one's leaving closes it.
    func releaseLane(_ lane: LaneID) { upstreams.release(lane) }

    /// An identity's lane closed, its last client gone: the core forgets its places.
    func identityClosed(_ lane: LaneID) {
        view.forget(lane)
        switchboard.endLane(lane, .connectionLost(reason: "the identity's last client left"))
    }

    /// Each upstream of the table as `status`, `STATUS=` and the metrics show it.
    var upstreamReports: [StatusReport.Upstream] {
        let all = upstreams.allLanes
        let counts = switchboard.countsByLane(single: all.count == 1 ? all[0].id : nil)
        return configuration.upstreams.map { entry in
            let lanes = upstreams.lanes(of: entry.name)
            var report = StatusReport.Upstream(
                name: entry.name,
                identity: entry.identity.name,
                snapshot: lanes.first?.carriers.snapshotOnLoop ?? Self.idleSnapshot(entry)
            )
            if entry.identity != .host {
                report.identities = lanes.map { ($0.identity ?? "host", $0.carriers.snapshotOnLoop) }
                if let connected = report.identities.first(where: { $0.snapshot.state == .connected }) { report.snapshot = connected.snapshot }
            }
            for lane in lanes {
                report.upstreamSubscriptions += counts[lane.id]?.upstream ?? 0
                report.localSubscriptions += counts[lane.id]?.local ?? 0
            }
            return report
        }
    }

    /// An upstream with no connection yet (an identity upstream before its first client).
    static func idleSnapshot(_ entry: NamedUpstream) -> UpstreamSnapshot {
        let upstream = entry.upstream
        let streams = upstream.streamsOverHTTP
        return UpstreamSnapshot(
            state: .idle,
            transport: upstream.carrier.rawValue,
            url: (streams ? upstream.httpURL?.description : nil) ?? upstream.url.description,
            wire: streams ? upstream.carrier.rawValue : "",
            connections: [],
            httpURL: upstream.httpURL?.description,
            reconnects: 0,
            streams: streams ? 0 : nil
        )
    }
}
