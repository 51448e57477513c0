import { Injectable, Module } from '@nestjs/common';
import { McpServerNotifier } from '../../src/entries/front.js';

/** A provider of the app that changes its plain tools at run time and announces it. */
@Injectable()
export class Catalogue {
  constructor(readonly changes: McpServerNotifier) {}
}

@Module({ providers: [Catalogue], exports: [Catalogue] })
export class CatalogueModule {}
