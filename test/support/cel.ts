// CEL expressions the health check limit tests share.

/** `depth` nested `.all` over a literal list of `items` numbers: items^depth steps if evaluated. */
export function nestedAll(depth: number, items = 20): string {
  const list = `[${Array.from({ length: items }, (_, i) => i + 1).join(',')}]`;
  let e = 'true';
  for (let i = 0; i < depth; i++) e = `${list}.all(v${i}, ${e})`;
  return e;
}
