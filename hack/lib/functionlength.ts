// Function lengths of a source file, for hack/check-function-length.ts (issue 34: no function over
// ~150 lines in controller/controllers/). Pure: a file name and its text in, lengths out.
//
// A function is a declaration, a method (constructors and accessors included), an arrow function
// or a function expression. Its length is the number of source lines from its first token (after
// leading comments and decorators' JSDoc) to its last, inclusive; a nested function counts in its
// own length and in every enclosing one's.
import ts from 'typescript';

export interface FunctionLength {
  /** 1-based line of the function's first token. */
  line: number;
  /** Its name, or what names it: the variable, property or class member it is assigned to. */
  name: string;
  /** Lines from first to last token, inclusive. */
  lines: number;
}

/** What a function is called: its own name, else the declaration it initialises. */
function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) {
    const cls = node.parent;
    return `${cls.name?.getText(source) ?? '<class>'}.constructor`;
  }
  if (node.name !== undefined) {
    const own = node.name.getText(source);
    const cls = node.parent;
    if (ts.isClassLike(cls)) return `${cls.name?.getText(source) ?? '<class>'}.${own}`;
    return own;
  }
  const parent = node.parent;
  if (
    (ts.isVariableDeclaration(parent) ||
      ts.isPropertyAssignment(parent) ||
      ts.isPropertyDeclaration(parent)) &&
    parent.name !== undefined
  )
    return parent.name.getText(source);
  if (ts.isExportAssignment(parent)) return 'default';
  return '<anonymous>';
}

function isMeasured(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node)
  );
}

/** Every function of the file with a body, in source order. */
export function functionLengths(fileName: string, text: string): FunctionLength[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: FunctionLength[] = [];
  const visit = (node: ts.Node): void => {
    if (isMeasured(node) && node.body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ line: first + 1, name: nameOf(node, source), lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The functions longer than `max` lines, longest first. */
export function longFunctions<F extends FunctionLength>(lengths: readonly F[], max: number): F[] {
  return lengths.filter((f) => f.lines > max).sort((a, b) => b.lines - a.lines || a.line - b.line);
}
