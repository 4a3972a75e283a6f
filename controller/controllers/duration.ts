// Go-style durations: the parser lives with the API fields it reads (api/duration.ts), so the pure
// reconcilers can use it too; the controllers keep importing it from here.
export { parseDuration } from '../api/duration.ts';
