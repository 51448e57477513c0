// Jest's globalSetup: marks this test run, so that its end can kill what the tests left running.
import { beginRun } from './run-mark.mjs';

export default beginRun;
