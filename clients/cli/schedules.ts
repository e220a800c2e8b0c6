import { Command } from "commander";
import type { Schedule, ScheduleFire } from "../schedule-records.js";
import { formatNanos, nowNanos, parseRfc3339 } from "../time.js";
import { forEachId, leafCommand, parseTime, withClients, type CommonFlags } from "./common.js";
import { action, printFields, printJson, printTable } from "./output.js";

/** A time field for display: `-` for the zero time or absent, RFC 3339 UTC otherwise (unparseable text is shown as is). */
function when(text: unknown): string | undefined {
  if (typeof text !== "string") return undefined;
  try {
    const ns = parseRfc3339(text);
    return ns === undefined ? undefined : formatNanos(ns);
  } catch {
    return text;
  }
}

function trigger(s: Schedule): string | undefined {
  const t = s.Spec.Trigger;
  if (t?.Cron) return `cron ${t.Cron}`;
  const once = when(t?.OneShot);
  return once === undefined ? undefined : `once ${once}`;
}

function printSchedules(schedules: Schedule[], json: boolean | undefined): void {
  schedules.sort((a, b) => a.Spec.Name.localeCompare(b.Spec.Name));
  if (json) return printJson(schedules);
  printTable(
    ["NAME", "ENABLED", "NEXT FIRE", "LAST FIRE", "FIRES", "TRIGGER", "LAST SESSION", "DELETING"],
    schedules.map((s) => [
      s.Spec.Name,
      s.State.Enabled ?? false,
      when(s.State.NextFireAt),
      when(s.State.LastFireAt),
      `${s.State.FireCount ?? 0}${s.Spec.MaxFires ? `/${s.Spec.MaxFires}` : ""}`,
      trigger(s),
      s.State.LastFireSessionID,
      s.State.DeletionID,
    ]),
  );
}

function firedAt(f: ScheduleFire): bigint {
  try {
    return parseRfc3339(f.FiredAt) ?? 0n;
  } catch {
    return 0n;
  }
}

/**
 * `mecatl-drivers schedules list|get|due|fires|enable|disable|delete`:
 * ScheduleStoreService as an operator uses it (wire-contract.md section 5).
 */
export function schedulesCommand(): Command {
  const schedules = new Command("schedules").description("inspect, enable, disable and delete scheduled tasks and their fires (ScheduleStoreService)");

  schedules.addCommand(
    leafCommand("list", "list every schedule with its firing state", "schedule-store").action(
      action(async (flags: CommonFlags) => {
        printSchedules(await withClients(flags, "schedule-store", (c) => c.scheduleStore!.listSchedules()), flags.json);
      }),
    ),
  );

  schedules.addCommand(
    leafCommand("get", "show one schedule: spec and state", "schedule-store")
      .argument("<name>", "the schedule name")
      .action(
        action(async (name: string, flags: CommonFlags) => {
          const s = await withClients(flags, "schedule-store", (c) => c.scheduleStore!.loadSchedule(name));
          if (flags.json) return printJson(s);
          printFields([
            ["name", s.Spec.Name],
            ["trigger", trigger(s)],
            ["prompt", typeof s.Spec.Prompt === "string" ? s.Spec.Prompt : undefined],
            ["max fires", s.Spec.MaxFires || undefined],
            ["placement owned", s.Spec.PlacementOwned ?? false],
            ["enabled", s.State.Enabled ?? false],
            ["next fire", when(s.State.NextFireAt)],
            ["last fire", when(s.State.LastFireAt)],
            ["fire count", s.State.FireCount ?? 0],
            ["last fire session", s.State.LastFireSessionID],
            ["last fire started", when(s.State.LastFireStartedAt)],
            ["last fire progress", when(s.State.LastFireProgressAt)],
            ["fire deadline", when(s.State.FireDeadline)],
            ["deletion id", s.State.DeletionID],
          ]);
        }),
      ),
  );

  schedules.addCommand(
    leafCommand("due", "list the schedules due now (or at --at); nothing is claimed", "schedule-store")
      .option("--at <time>", "RFC 3339 time to evaluate instead of now", parseTime)
      .action(
        action(async (flags: CommonFlags & { at?: bigint }) => {
          printSchedules(await withClients(flags, "schedule-store", (c) => c.scheduleStore!.dueSchedules(flags.at ?? nowNanos())), flags.json);
        }),
      ),
  );

  schedules.addCommand(
    leafCommand("fires", "list the fires of a schedule, oldest first", "schedule-store")
      .argument("<name>", "the schedule name")
      .action(
        action(async (name: string, flags: CommonFlags) => {
          const fires = await withClients(flags, "schedule-store", (c) => c.scheduleStore!.listFires(name));
          fires.sort((a, b) => (firedAt(a) === firedAt(b) ? a.ID.localeCompare(b.ID) : firedAt(a) < firedAt(b) ? -1 : 1));
          if (flags.json) return printJson(fires);
          printTable(
            ["FIRE", "SESSION", "FIRED", "STARTED", "PROGRESS", "DEADLINE", "STOP", "ERROR"],
            fires.map((f) => [f.ID, f.SessionID, when(f.FiredAt), when(f.StartedAt), when(f.ProgressAt), when(f.Deadline), f.Stop || "(in flight)", f.Err]),
          );
        }),
      ),
  );
  for (const enabled of [true, false]) {
    schedules.addCommand(
      leafCommand(enabled ? "enable" : "disable", enabled ? "let schedules fire again when due (SetScheduleEnabled)" : "stop schedules from firing, keeping them and their fires (SetScheduleEnabled)", "schedule-store")
        .argument("<name...>", "the schedule names")
        .action(action((names: string[], flags: CommonFlags) => forEachId(names, flags, "schedule-store", { noun: "schedule name", verb: enabled ? "enabled" : "disabled" }, (c, name) => c.scheduleStore!.setScheduleEnabled(name, enabled)))),
    );
  }

  schedules.addCommand(
    leafCommand("delete", "delete schedules (DeleteSchedule; idempotent: an unknown name is not an error); refused while an owned-placement deletion is pending", "schedule-store")
      .argument("<name...>", "the schedule names")
      .action(action((names: string[], flags: CommonFlags) => forEachId(names, flags, "schedule-store", { noun: "schedule name", verb: "deleted" }, (c, name) => c.scheduleStore!.deleteSchedule(name)))),
  );
  return schedules;
}
