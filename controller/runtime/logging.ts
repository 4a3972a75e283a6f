// Structured JSON logs (pino). Every line about an object carries kind, namespace, name and the
// reconcile id, so one object's story can be grepped out of the controller's output.
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';

export type Logger = pino.Logger;

export interface LoggerOptions {
  level?: string;
  /** Where JSON lines go; stdout by default. Tests pass a stream to capture them. */
  destination?: pino.DestinationStream;
  /** Fields added to every line (e.g. { controller: 'clusterstack' }). */
  base?: Record<string, unknown>;
}

export function newLogger(opts: LoggerOptions = {}): Logger {
  const options: pino.LoggerOptions = {
    level: opts.level ?? 'info',
    base: { ...(opts.base ?? {}) },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A logger that discards everything (tests that do not look at logs). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

export interface ObjectRef {
  kind: string;
  namespace?: string | undefined;
  name: string;
}

/** "namespace/name" or "name" for cluster-scoped objects, the key format of the work queue. */
export function keyOf(ref: { namespace?: string | undefined; name: string }): string {
  return ref.namespace ? `${ref.namespace}/${ref.name}` : ref.name;
}

/** Splits a queue key back into namespace and name. */
export function splitKey(key: string): { namespace?: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export function newReconcileID(): string {
  return randomUUID();
}

/** Child logger for one object (and, when given, one reconcile). */
export function objectLogger(parent: Logger, ref: ObjectRef, reconcileID?: string): Logger {
  const fields: Record<string, string> = { kind: ref.kind, name: ref.name };
  if (ref.namespace) fields.namespace = ref.namespace;
  if (reconcileID) fields.reconcileID = reconcileID;
  return parent.child(fields);
}

/** Error → loggable fields without leaking non-Error throwables as "[object Object]". */
export function errorFields(err: unknown): { err: { message: string; name?: string; stack?: string } } {
  if (err instanceof Error) return { err: { message: err.message, name: err.name, stack: err.stack ?? '' } };
  let message: string;
  try {
    message = typeof err === 'string' ? err : JSON.stringify(err);
  } catch {
    message = String(err);
  }
  return { err: { message: message ?? String(err) } };
}
