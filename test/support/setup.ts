import { Logger } from '@nestjs/common';

// Keep test output readable; tests that check logging spy on Logger.prototype.
Logger.overrideLogger(false);
