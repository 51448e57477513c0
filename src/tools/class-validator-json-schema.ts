/**
 * JSON Schema (draft 2020-12) from class-validator metadata: what a DTO class given as a tool's
 * `input` publishes on tools/list. Reads the decorators' metadata only; validation itself stays
 * with class-validator.
 */
import type { getMetadataStorage } from 'class-validator';
import { dtoLibraries } from './dto-libraries.js';

/** A DTO class: any constructor class-validator may hold metadata for. */
export type DtoClass = new (...args: never[]) => object;
type JsonObject = Record<string, unknown>;
/** class-validator's ValidationMetadata, which its package does not export by name. */
type ValidationMetadata = ReturnType<
  ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']
>[number];

// class-validator's metadata kinds (ValidationTypes); the strings are stable across versions.
const CUSTOM = 'customValidation';
const NESTED = 'nestedValidation';
const CONDITIONAL = 'conditionalValidation';
const IS_DEFINED = 'isDefined';

/** Every validation decorator class-validator holds for a class, inherited ones included. */
export function metadataOf(target: DtoClass): ValidationMetadata[] {
  return dtoLibraries()
    .validator.getMetadataStorage()
    .getTargetValidationMetadatas(target, '', true, false);
}

/** A DTO class's JSON Schema, and whether any of its constraints validates asynchronously. */
export interface DtoJsonSchema {
  schema: JsonObject;
  hasAsyncConstraints: boolean;
}

/** Builds the JSON Schema of a DTO class (see SchemaBuilder). */
export function dtoJsonSchema(dto: DtoClass): DtoJsonSchema {
  const builder = new SchemaBuilder(dto);
  const schema = builder.root();
  return { schema, hasAsyncConstraints: builder.hasAsyncConstraints };
}

/** Keywords collected for one value (a property, or the items of an array property). */
interface Facets {
  schema: JsonObject;
  notEmpty: boolean;
}

/**
 * Builds the JSON Schema (draft 2020-12) of a DTO class: one property per decorated field, every
 * field required unless validation lets it be absent, no other keys. Nested DTOs are inlined; a
 * class that contains itself, directly or not, is emitted once under `$defs` and referenced.
 */
class SchemaBuilder {
  hasAsyncConstraints = false;
  private readonly building = new Set<DtoClass>();
  private readonly defs = new Map<DtoClass, { name: string; schema?: JsonObject }>();
  private readonly defNames = new Set<string>();

  constructor(private readonly dto: DtoClass) {}

  root(): JsonObject {
    const schema = this.classSchema(this.dto);
    if (this.defs.size === 0) return schema;
    const $defs: JsonObject = {};
    for (const { name, schema: def } of this.defs.values()) $defs[name] = def;
    return { ...schema, $defs };
  }

  private classSchema(cls: DtoClass): JsonObject {
    const known = this.defs.get(cls);
    if (known?.schema !== undefined) return { $ref: `#/$defs/${known.name}` };
    if (this.building.has(cls)) {
      if (cls === this.dto) return { $ref: '#' };
      return { $ref: `#/$defs/${this.defFor(cls).name}` };
    }
    this.building.add(cls);
    const schema = this.objectSchema(cls);
    this.building.delete(cls);
    const def = this.defs.get(cls);
    if (def === undefined) return schema;
    def.schema = schema;
    return { $ref: `#/$defs/${def.name}` };
  }

  private defFor(cls: DtoClass): { name: string; schema?: JsonObject } {
    let def = this.defs.get(cls);
    if (def === undefined) {
      const base = cls.name.replace(/[^A-Za-z0-9_]/g, '') || 'Dto';
      let name = base;
      for (let n = 2; this.defNames.has(name); n++) name = `${base}${n}`;
      this.defNames.add(name);
      def = { name };
      this.defs.set(cls, def);
    }
    return def;
  }

  private objectSchema(cls: DtoClass): JsonObject {
    const byProperty = new Map<string, ValidationMetadata[]>();
    for (const meta of metadataOf(cls)) {
      if (typeof meta.propertyName !== 'string') continue;
      const list = byProperty.get(meta.propertyName);
      if (list === undefined) byProperty.set(meta.propertyName, [meta]);
      else list.push(meta);
    }
    if (byProperty.size === 0) return { type: 'object', properties: {} };
    const properties: JsonObject = {};
    const required: string[] = [];
    for (const [property, metas] of byProperty) {
      properties[property] = this.propertySchema(cls, property, metas);
      if (isRequired(metas)) required.push(property);
    }
    return {
      type: 'object',
      properties,
      ...(required.length > 0 ? { required } : {}),
      additionalProperties: false,
    };
  }

  private propertySchema(cls: DtoClass, property: string, metas: ValidationMetadata[]): JsonObject {
    const own: Facets = { schema: {}, notEmpty: false };
    const items: Facets = { schema: {}, notEmpty: false };
    let nested = false;
    for (const meta of metas) {
      if (meta.type === NESTED) nested = true;
      if (meta.type !== CUSTOM) continue;
      this.noteAsync(meta);
      applyConstraint(meta, meta.each ? items : own);
    }
    let itemSchema = finish(items);
    const schema = own.schema;
    if (nested) {
      const child = nestedClass(cls, property);
      const childSchema = child === undefined ? { type: 'object' } : this.classSchema(child);
      if (schema.type === 'array') itemSchema = { ...itemSchema, ...childSchema };
      else if (schema.type === undefined || schema.type === 'object') {
        Object.assign(schema, childSchema);
      }
    }
    if (Object.keys(itemSchema).length > 0) schema.items = itemSchema;
    return finish(own);
  }

  private noteAsync(meta: ValidationMetadata): void {
    if (this.hasAsyncConstraints) return;
    const constraints = dtoLibraries()
      .validator.getMetadataStorage()
      .getTargetValidatorConstraints(meta.constraintCls);
    if (constraints.some((c) => c.async)) this.hasAsyncConstraints = true;
  }
}

/**
 * Absent is accepted when a conditional decorator (IsOptional, ValidateIf) may skip the field, or
 * when nothing on it checks a plain value (only ValidateNested or Allow).
 */
function isRequired(metas: readonly ValidationMetadata[]): boolean {
  if (metas.some((m) => m.type === CONDITIONAL)) return false;
  return metas.some((m) => m.type === CUSTOM || m.type === IS_DEFINED);
}

function finish(facets: Facets): JsonObject {
  const { schema } = facets;
  if (facets.notEmpty && schema.type === 'string') {
    const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
    schema.minLength = Math.max(min, 1);
  }
  return schema;
}

/** The class `@Type(() => Child)` names, found by letting class-transformer build a sample. */
function nestedClass(cls: DtoClass, property: string): DtoClass | undefined {
  try {
    const sample = dtoLibraries().transformer.plainToInstance(cls as new () => object, {
      [property]: {},
    }) as JsonObject;
    const value = sample[property];
    if (typeof value !== 'object' || value === null) return undefined;
    const ctor: unknown = Object.getPrototypeOf(value)?.constructor;
    return typeof ctor === 'function' && ctor !== Object ? (ctor as DtoClass) : undefined;
  } catch {
    return undefined;
  }
}

/** Regex flags that leave a pattern's meaning unchanged; with any other, no `pattern` is given. */
const NEUTRAL_FLAGS = /^[gdu]*$/;

/** The JSON Schema `type` each type check sets (see setType). */
const TYPE_OF_CHECK = new Map([
  ['isString', 'string'],
  ['isNumber', 'number'],
  ['isInt', 'integer'],
  ['isBoolean', 'boolean'],
  ['isArray', 'array'],
  ['isObject', 'object'],
]);

/** The string `format` each format check sets. */
const FORMAT_OF_CHECK = new Map([
  ['isEmail', 'email'],
  ['isUrl', 'uri'],
  ['isUuid', 'uuid'],
]);

/** The keyword each single-count check sets from its count (a non-negative integer). */
const COUNT_KEYWORD_OF_CHECK = new Map([
  ['minLength', 'minLength'],
  ['maxLength', 'maxLength'],
  ['arrayMinSize', 'minItems'],
  ['arrayMaxSize', 'maxItems'],
]);

function applyConstraint(meta: ValidationMetadata, facets: Facets): void {
  const schema = facets.schema;
  const args: unknown[] = Array.isArray(meta.constraints) ? meta.constraints : [];
  const [first, second] = args;
  const check = meta.name ?? '';
  const type = TYPE_OF_CHECK.get(check);
  if (type !== undefined) return setType(schema, type);
  const format = FORMAT_OF_CHECK.get(check);
  if (format !== undefined) {
    schema.format = format;
    return;
  }
  const keyword = COUNT_KEYWORD_OF_CHECK.get(check);
  if (keyword !== undefined) {
    if (isCount(first)) schema[keyword] = first;
    return;
  }
  switch (meta.name) {
    case 'isIn':
      if (Array.isArray(first)) schema.enum = jsonPrimitives(first);
      break;
    case 'isEnum':
      if (Array.isArray(second)) schema.enum = jsonPrimitives(second);
      else if (typeof first === 'object' && first !== null) {
        schema.enum = jsonPrimitives(Object.values(first));
      }
      break;
    case 'equals':
      if (jsonPrimitives([first]).length === 1) schema.const = first;
      break;
    case 'min':
      if (isFiniteNumber(first)) schema.minimum = first;
      break;
    case 'max':
      if (isFiniteNumber(first)) schema.maximum = first;
      break;
    case 'isPositive':
      schema.exclusiveMinimum = 0;
      break;
    case 'isNegative':
      schema.exclusiveMaximum = 0;
      break;
    case 'isLength':
      if (isCount(first)) schema.minLength = first;
      if (isCount(second)) schema.maxLength = second;
      break;
    case 'isNotEmpty':
      facets.notEmpty = true;
      break;
    case 'matches': {
      const pattern = patternOf(first, second);
      if (pattern !== undefined) schema.pattern = pattern;
      break;
    }
    case 'arrayNotEmpty':
      schema.minItems = Math.max(typeof schema.minItems === 'number' ? schema.minItems : 0, 1);
      break;
    default:
      // Not reflected in the schema; validation still enforces it.
      break;
  }
}

/** IsInt narrows IsNumber whichever comes first; other types are set by the first decorator. */
function setType(schema: JsonObject, type: string): void {
  if (schema.type === undefined || (schema.type === 'number' && type === 'integer')) {
    schema.type = type;
  }
}

function patternOf(source: unknown, modifiers: unknown): string | undefined {
  if (source instanceof RegExp) return NEUTRAL_FLAGS.test(source.flags) ? source.source : undefined;
  if (typeof source !== 'string') return undefined;
  if (
    modifiers !== undefined &&
    (typeof modifiers !== 'string' || !NEUTRAL_FLAGS.test(modifiers))
  ) {
    return undefined;
  }
  return source;
}

function jsonPrimitives(values: readonly unknown[]): unknown[] {
  return values.filter(
    (v) => v === null || typeof v === 'string' || typeof v === 'boolean' || isFiniteNumber(v),
  );
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}
