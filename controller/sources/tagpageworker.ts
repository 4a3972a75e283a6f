// The worker thread of tagpage.ts: parses and sieves the large pages of OCI tag listings.
import { parentPort } from 'node:worker_threads';
import { answerPage, type PageRequest } from './tagpage.ts';

parentPort?.on('message', (request: PageRequest) => parentPort?.postMessage(answerPage(request)));
