import type { LoggerService } from '@nestjs/common';

/** A Nest logger that keeps what is logged at WARN and ERROR level, and drops the rest. */
export class KeptLog implements LoggerService {
  readonly errors: string[] = [];
  readonly warnings: string[] = [];
  log(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}
