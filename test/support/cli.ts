// Runs the CLI in-process with captured output (tests of stackflux commands).
import type { CommandIO } from '../../controller/cli/command.ts';

export function captureIO(env: Record<string, string> = {}): {
  io: CommandIO;
  out: () => string;
  err: () => string;
} {
  let out = '';
  let err = '';
  return {
    io: { stdout: (t) => (out += t), stderr: (t) => (err += t), env },
    out: () => out,
    err: () => err,
  };
}
