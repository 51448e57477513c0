/** A free loopback port (asked of the OS, then released). */
export function freePort(): Promise<number>;
