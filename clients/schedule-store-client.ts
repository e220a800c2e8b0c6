import { Code, createClient, type Client, type ConnectError, type Transport } from "@connectrpc/connect";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../gen/mecatl/driver/v1/schedule_store_pb.js";
import { deleteCall, unaryCall, requireText, type CallOptions } from "./call.js";
import { ActiveFireError, DeletionPendingError, FireNotFoundError, ScheduleNotFoundError, InvalidRequestError } from "./errors.js";
import { instantToNanos, instantToTimestamp, type Instant } from "./time.js";
import { decodeFire, decodeSchedule, encodeRecord, scheduleFormat, SCHEDULE_FORMAT, type Schedule, type ScheduleFire } from "./schedule-records.js";

const SERVICE = "ScheduleStoreService";

/** Maps the schedule store's statuses (wire-contract.md section 5.6) for one schedule or fire key. */
function scheduleErrors(key: string, operation: string, notFound: () => Error = () => new ScheduleNotFoundError(key, operation, `schedule ${JSON.stringify(key)} not found`)) {
  return (err: ConnectError) => {
    switch (err.code) {
      case Code.NotFound:
        return notFound();
      case Code.Aborted:
        return new DeletionPendingError(key, operation, err.rawMessage);
      case Code.FailedPrecondition:
        return new ActiveFireError(key, operation, err.rawMessage);
      default:
        return undefined;
    }
  };
}

/** The Timestamp of an optional next fire: unset for undefined or the zero instant ("no further fire", section 5.5). */
function nextFireTimestamp(nextFire: Instant | undefined) {
  return nextFire === undefined || instantToNanos(nextFire) === 0n ? undefined : instantToTimestamp(nextFire);
}

function checkFire(operation: string, fire: ScheduleFire): Uint8Array {
  requireText(operation, "fire ID", fire.ID);
  return encodeRecord(fire);
}

/**
 * ScheduleStoreService (and ScheduleOneShotReArmerService) client with the
 * harness's semantics (wire-contract.md sections 5.3 to 5.6). Schedules and
 * fires travel as the harness's JSON; the client picks the schedule tag from
 * `Spec.PlacementOwned` and checks every returned record.
 *
 * Errors: {@link ScheduleNotFoundError} (NOT_FOUND: unknown schedule, or the
 * slot is gone for Claim/ClaimNow), {@link FireNotFoundError} (LoadFire),
 * {@link DeletionPendingError} (ABORTED), {@link ActiveFireError}
 * (FAILED_PRECONDITION), {@link UnsupportedError} (UNIMPLEMENTED; for
 * ReArmOneShot only the re-arm path), {@link InvalidDriverResponseError} (an
 * unknown tag, a tag that disagrees with PlacementOwned, a schedule of another
 * name, a fire of another id), {@link InfrastructureError} otherwise.
 * DeleteSchedule treats NOT_FOUND as success.
 */
export class ScheduleStoreClient {
  private readonly rpc: Client<typeof ScheduleStoreService>;
  private readonly reArmer: Client<typeof ScheduleOneShotReArmerService>;

  constructor(transport: Transport) {
    this.rpc = createClient(ScheduleStoreService, transport);
    this.reArmer = createClient(ScheduleOneShotReArmerService, transport);
  }

  /**
   * Stores a schedule under `schedule.Spec.Name`. An existing schedule keeps
   * its State (only Spec is replaced); a new one with a zero State starts
   * enabled.
   *
   * @throws DeletionPendingError when a deletion is pending.
   */
  async saveSchedule(schedule: Schedule, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/SaveSchedule`;
    const name = requireText(operation, "Spec.Name", schedule?.Spec?.Name);
    await unaryCall(operation, options, (o) => this.rpc.saveSchedule({ name, schedule: { format: scheduleFormat(schedule), payload: encodeRecord(schedule) } }, o), scheduleErrors(name, operation));
  }

  /** @throws ScheduleNotFoundError when no schedule has this name. */
  async loadSchedule(name: string, options?: CallOptions): Promise<Schedule> {
    const operation = `${SERVICE}/LoadSchedule`;
    requireText(operation, "name", name);
    const res = await unaryCall(operation, options, (o) => this.rpc.loadSchedule({ name }, o), scheduleErrors(name, operation));
    return decodeSchedule(res.schedule, operation, name);
  }

  /**
   * Deletes a schedule; NOT_FOUND is success.
   *
   * @throws DeletionPendingError when an owned-placement deletion is pending.
   */
  async deleteSchedule(name: string, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/DeleteSchedule`;
    requireText(operation, "name", name);
    await deleteCall(operation, options, (o) => this.rpc.deleteSchedule({ name }, o), scheduleErrors(name, operation));
  }

  /** Every schedule, in the driver's order. */
  async listSchedules(options?: CallOptions): Promise<Schedule[]> {
    const operation = `${SERVICE}/ListSchedules`;
    const res = await unaryCall(operation, options, (o) => this.rpc.listSchedules({}, o));
    return res.schedules.map((s) => decodeSchedule(s, operation));
  }

  /** Schedules due at `now` (enabled, next fire at or before `now`, under MaxFires); no side effects. */
  async dueSchedules(now: Instant, options?: CallOptions): Promise<Schedule[]> {
    const operation = `${SERVICE}/DueSchedules`;
    const res = await unaryCall(operation, options, (o) => this.rpc.dueSchedules({ now: instantToTimestamp(now) }, o));
    return res.schedules.map((s) => decodeSchedule(s, operation));
  }

  /**
   * Atomically claims the due slot of `name` at `now` and moves the next fire
   * to `nextFire` (undefined or zero: no further fire, the schedule disables).
   * At most one claim per slot succeeds.
   *
   * @throws ScheduleNotFoundError when the schedule is unknown or the slot is
   *   gone (already claimed, not due, disabled, exhausted, deleting).
   */
  async claimSchedule(name: string, now: Instant, nextFire?: Instant, options?: CallOptions): Promise<Schedule> {
    const operation = `${SERVICE}/ClaimSchedule`;
    requireText(operation, "name", name);
    const res = await unaryCall(operation, options, (o) => this.rpc.claimSchedule({ name, now: instantToTimestamp(now), nextFire: nextFireTimestamp(nextFire) }, o), scheduleErrors(name, operation));
    return decodeSchedule(res.schedule, operation, name);
  }

  /**
   * Claims a fire now without the due check (fire-now); a second ClaimNow, or
   * one after a Claim, at the same `now` (nanosecond equality) fails.
   *
   * @throws ScheduleNotFoundError as {@link claimSchedule}.
   */
  async claimScheduleNow(name: string, now: Instant, nextFire?: Instant, options?: CallOptions): Promise<Schedule> {
    const operation = `${SERVICE}/ClaimScheduleNow`;
    requireText(operation, "name", name);
    const res = await unaryCall(operation, options, (o) => this.rpc.claimScheduleNow({ name, now: instantToTimestamp(now), nextFire: nextFireTimestamp(nextFire) }, o), scheduleErrors(name, operation));
    return decodeSchedule(res.schedule, operation, name);
  }

  /** Sets only `State.Enabled`. @throws ScheduleNotFoundError, DeletionPendingError. */
  async setScheduleEnabled(name: string, enabled: boolean, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/SetScheduleEnabled`;
    requireText(operation, "name", name);
    await unaryCall(operation, options, (o) => this.rpc.setScheduleEnabled({ name, enabled }, o), scheduleErrors(name, operation));
  }

  /**
   * Marks the schedule as being deleted under `deletionId` (disables it) and
   * returns it; a deletion already pending is returned unchanged.
   *
   * @throws ScheduleNotFoundError; ActiveFireError when a fire is claimed or running.
   */
  async beginScheduleDelete(name: string, deletionId: string, options?: CallOptions): Promise<Schedule> {
    const operation = `${SERVICE}/BeginScheduleDelete`;
    requireText(operation, "name", name);
    requireText(operation, "deletion id", deletionId);
    const res = await unaryCall(operation, options, (o) => this.rpc.beginScheduleDelete({ name, deletionId }, o), scheduleErrors(name, operation));
    return decodeSchedule(res.schedule, operation, name);
  }

  /** Removes the schedule if its pending deletion id is `deletionId`. @throws DeletionPendingError (ABORTED) otherwise. */
  async completeScheduleDelete(name: string, deletionId: string, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/CompleteScheduleDelete`;
    requireText(operation, "name", name);
    requireText(operation, "deletion id", deletionId);
    await unaryCall(operation, options, (o) => this.rpc.completeScheduleDelete({ name, deletionId }, o), scheduleErrors(name, operation));
  }

  /**
   * Records a finished (or any) fire under `fire.ID`; the schedule is the
   * fire's `ScheduleName`. Re-recording a terminal fire changes nothing.
   *
   * @throws ScheduleNotFoundError when the schedule is unknown.
   */
  async recordFire(fire: ScheduleFire, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/RecordFire`;
    const payload = checkFire(operation, fire);
    await unaryCall(operation, options, (o) => this.rpc.recordFire({ fireId: fire.ID, fire: { format: SCHEDULE_FORMAT, payload } }, o), scheduleErrors(fire.ScheduleName, operation));
  }

  /** Records that a fire of schedule `name` started (in-flight state). @throws ScheduleNotFoundError. */
  async recordFireStart(name: string, fire: ScheduleFire, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/RecordFireStart`;
    requireText(operation, "name", name);
    const payload = checkFire(operation, fire);
    await unaryCall(operation, options, (o) => this.rpc.recordFireStart({ name, fireId: fire.ID, fire: { format: SCHEDULE_FORMAT, payload } }, o), scheduleErrors(name, operation));
  }

  /** Advances the progress time of schedule `name` and of fire `fireId` (never backwards). @throws ScheduleNotFoundError. */
  async recordFireProgress(name: string, fireId: string, at: Instant, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/RecordFireProgress`;
    requireText(operation, "name", name);
    requireText(operation, "fire id", fireId);
    await unaryCall(operation, options, (o) => this.rpc.recordFireProgress({ name, fireId, at: instantToTimestamp(at) }, o), scheduleErrors(name, operation));
  }

  /** @throws FireNotFoundError when no fire has this id. */
  async loadFire(fireId: string, options?: CallOptions): Promise<ScheduleFire> {
    const operation = `${SERVICE}/LoadFire`;
    requireText(operation, "fire id", fireId);
    const res = await unaryCall(operation, options, (o) => this.rpc.loadFire({ fireId }, o), scheduleErrors(fireId, operation, () => new FireNotFoundError(fireId, operation)));
    return decodeFire(res.fire, operation, fireId);
  }

  /** Every fire of `scheduleName`, in no guaranteed order. @throws ScheduleNotFoundError when the schedule is unknown. */
  async listFires(scheduleName: string, options?: CallOptions): Promise<ScheduleFire[]> {
    const operation = `${SERVICE}/ListFires`;
    requireText(operation, "schedule name", scheduleName);
    const res = await unaryCall(operation, options, (o) => this.rpc.listFires({ scheduleName }, o), scheduleErrors(scheduleName, operation));
    return res.fires.map((f) => decodeFire(f, operation));
  }

  /**
   * Re-arms a one-shot schedule to fire at `nextFire` (enables it, counts a
   * retry), on ScheduleOneShotReArmerService.
   *
   * @throws UnsupportedError when that service is not served; ScheduleNotFoundError; DeletionPendingError.
   */
  async reArmOneShot(name: string, nextFire: Instant, options?: CallOptions): Promise<void> {
    const operation = "ScheduleOneShotReArmerService/ReArmOneShot";
    requireText(operation, "name", name);
    if (instantToNanos(nextFire) === 0n) throw new InvalidRequestError("the next fire time must be set", operation);
    await unaryCall(operation, options, (o) => this.reArmer.reArmOneShot({ name, nextFire: instantToTimestamp(nextFire) }, o), scheduleErrors(name, operation));
  }
}
