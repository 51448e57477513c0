import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.js';

const app = await NestFactory.create<NestFastifyApplication>(AppModule, new FastifyAdapter(), {
  logger: ['error', 'warn'],
  forceCloseConnections: true,
});
app.enableShutdownHooks();
await app.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
const { port } = app.getHttpServer().address() as AddressInfo;
console.log(`listening on ${port} (${typeof require === 'function' ? 'CommonJS' : 'ESM'})`);
