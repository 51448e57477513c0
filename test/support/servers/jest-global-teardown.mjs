// Jest's globalTeardown: kills every process of this run still running (see run-mark.mjs).
import { endRun } from './run-mark.mjs';

export default endRun;
