// Text from objects convert reads (a tenant's ClusterStack, CSO's Deployment) goes to the admin's
// terminal: a raw ESC, CSI (U+009B) or bidi override there is a terminal escape or a line that
// reads differently from what it is. Values are shown JSON-quoted with every such character escaped.

/** C0/C1 controls, DEL, line/paragraph separators and bidi controls: escaped as \uXXXX. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is its purpose
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const hex = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** A value as a JSON string literal, with the controls JSON leaves raw (C1, bidi) escaped too. */
export function quote(value: string): string {
  return JSON.stringify(value).replace(UNSAFE, hex);
}

/** A name shown as it is when it is a plain name (letters, digits, `.`, `_`, `-`), else quoted. */
export function named(value: string): string {
  return /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(value) ? value : quote(value);
}

/** A whole line for a terminal: every unsafe character escaped (the last line of defence). */
export function terminalSafe(line: string): string {
  return line.replace(UNSAFE, hex);
}
