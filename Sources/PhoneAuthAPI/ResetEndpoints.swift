import EmulatorSupport
import PhoneAuthCore

/// Reset to the starting state and named snapshots (PhoneAuthCore/Snapshots.swift):
/// `POST /emulator/v1/projects/{p}:reset`, `POST /emulator/v1:reset`, `POST …:snapshot {name}`, `POST …:restore {name}`,
/// `GET …/snapshots`, `DELETE …/snapshots/{name}`.
enum ResetEndpoints {
    static func summary(_ s: ProjectStateSummary) -> JSON {
        ["projectId": .string(s.projectId), "users": .int(s.users), "tenants": .array(s.tenants.map(JSON.string))]
    }

    static func info(_ s: SnapshotInfo) -> JSON {
        ["name": .string(s.name), "createdAt": .string(Timestamp.rfc3339(millis: s.createdAt)), "users": .int(s.users),
         "tenants": .array(s.tenants.map(JSON.string)), "records": .int(s.records)]
    }

    /// `{projectId, users, tenants}` after the reset.
    static func resetProject(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(summary(try app.emulator.resetProject(call.projectId)))
    }

    /// Every project, then the clock (`clock.changed` when it had moved): `{projects: [{projectId, users, tenants}], clock}`.
    static func resetAll(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let projects = try app.emulator.resetAll()
        if app.emulator.clock.offsetMillis != 0 {
            app.emulator.clock.reset()
            EmulatorControls.clockChanged(app)
        }
        return Reply(["projects": .array(projects.map(summary)), "clock": EmulatorControls.clockJSON(app)])
    }

    /// `{name}` → `{name, createdAt, users, tenants, records}`.
    static func save(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(info(try app.emulator.saveSnapshot(call.projectId, name: try SnapshotRegistry.checkName(try call.string("name")))))
    }

    /// `{name}` → `{projectId, users, tenants, snapshot}`; 404 `NOT_FOUND` for an unknown name.
    static func restore(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let name = try SnapshotRegistry.checkName(try call.string("name"))
        guard case .object(var o) = summary(try app.emulator.restoreSnapshot(call.projectId, name: name)) else { return Reply(.null) }
        o["snapshot"] = .string(name)
        return Reply(.object(o))
    }

    static func list(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(["snapshots": .array(app.emulator.snapshotList(call.projectId).map(info))])
    }

    static func delete(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        // `{snapshot}`, checked like a body's name.
        try app.emulator.deleteSnapshot(call.projectId, name: try SnapshotRegistry.checkName(call.params.snapshot))
        return Reply(.object([:]))
    }
}
