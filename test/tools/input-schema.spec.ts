import 'reflect-metadata';
import { Client } from '@modelcontextprotocol/client';
import {
  InMemoryTransport,
  McpServer,
  type StandardSchemaV1,
  type StandardSchemaWithJSON,
} from '@modelcontextprotocol/server';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  ArrayMinSize,
  ArrayNotEmpty,
  Equals,
  IsArray,
  IsBoolean,
  IsDefined,
  IsEmail,
  IsEnum,
  IsIn,
  IsInt,
  IsISO8601,
  IsNotEmpty,
  IsNumber,
  IsObject,
  IsOptional,
  IsPositive,
  IsString,
  IsUrl,
  IsUUID,
  Length,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  Validate,
  ValidateIf,
  ValidateNested,
  ValidatorConstraint,
  type ValidatorConstraintInterface,
} from 'class-validator';
import { z } from 'zod';
import { show, TasksConfigError } from '../../src/errors.js';
import { loadDtoLibraries } from '../../src/tools/dto-libraries.js';
import { isStandardSchema, toToolInputSchema } from '../../src/tools/input-schema.js';

// What the explorer and runTaskTool do before they read a DTO class.
await loadDtoLibraries();

enum Color {
  Red = 'red',
  Green = 'green',
}

enum Level {
  Low,
  High,
}

class Address {
  @IsString()
  @MinLength(1)
  street!: string;

  @IsString()
  @Matches(/^\d{5}$/)
  zip!: string;
}

class Person {
  @IsString()
  name!: string;

  @IsObject()
  @ValidateNested()
  @Type(() => Address)
  address!: Address;

  @IsOptional()
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => Address)
  previous?: Address[];
}

class Everything {
  @IsString()
  @MinLength(2)
  @MaxLength(10)
  name!: string;

  @IsNumber()
  @Min(0)
  @Max(100)
  score!: number;

  @IsInt()
  @IsPositive()
  count!: number;

  @IsNumber()
  @IsInt()
  whole!: number;

  @IsBoolean()
  flag!: boolean;

  @IsOptional()
  @IsString()
  note?: string;

  @IsIn(['a', 'b', 3])
  choice!: string | number;

  @IsEnum(Color)
  color!: Color;

  @IsEnum(Level)
  level!: Level;

  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(5)
  @IsString({ each: true })
  @MaxLength(20, { each: true })
  tags!: string[];

  @IsArray()
  @ArrayNotEmpty()
  @IsInt({ each: true })
  ids!: number[];

  @IsString()
  @IsNotEmpty()
  title!: string;

  @IsString()
  @Length(3, 8)
  code!: string;

  @IsEmail()
  email!: string;

  @IsUrl()
  site!: string;

  @IsUUID()
  id!: string;

  @IsString()
  @Matches(/^[a-z]+$/)
  slug!: string;

  @IsString()
  @Matches('^x-', 'g')
  prefixed!: string;

  @IsString()
  @Matches(/^abc$/i)
  caseless!: string;

  @IsObject()
  meta!: Record<string, unknown>;

  @Equals('v1')
  version!: string;

  @IsISO8601()
  when!: string;

  @ValidateIf((o: Everything) => o.flag)
  @IsString()
  reason?: string;

  @IsDefined()
  anything!: unknown;

  @Allow()
  loose?: unknown;
}

class Empty {}

class TreeNode {
  @IsString()
  label!: string;

  @IsOptional()
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => TreeNode)
  children?: TreeNode[];
}

class Folder {
  @IsString()
  name!: string;

  // A union keeps decorator metadata from naming FileEntry before it is declared.
  @IsOptional()
  @ValidateNested()
  @Type(() => FileEntry)
  readme?: FileEntry | null;
}

class FileEntry {
  @IsString()
  path!: string;

  @IsOptional()
  @ValidateNested()
  @Type(() => Folder)
  parent?: Folder;
}

class Drive {
  @IsObject()
  @ValidateNested()
  @Type(() => Folder)
  root!: Folder;

  @IsOptional()
  @ValidateNested()
  @Type(() => Folder)
  backup?: Folder;
}

@ValidatorConstraint({ name: 'notTaken', async: true })
class NotTaken implements ValidatorConstraintInterface {
  async validate(value: unknown): Promise<boolean> {
    await Promise.resolve();
    return value !== 'taken';
  }

  defaultMessage(): string {
    return 'username is taken';
  }
}

class SignUp {
  @IsString()
  @Validate(NotTaken)
  username!: string;
}

const ADDRESS_SCHEMA = {
  type: 'object',
  properties: {
    street: { type: 'string', minLength: 1 },
    zip: { type: 'string', pattern: '^\\d{5}$' },
  },
  required: ['street', 'zip'],
  additionalProperties: false,
};

const validPerson = () => ({
  name: 'Ada',
  address: { street: 'Main St', zip: '12345' },
  previous: [{ street: 'Old Rd', zip: '54321' }],
});

function schemaOf(input: Parameters<typeof toToolInputSchema>[0]): StandardSchemaWithJSON {
  const schema = toToolInputSchema(input, 'tool');
  if (schema === undefined) throw new Error('expected a schema');
  return schema;
}

function jsonOf(schema: StandardSchemaWithJSON): Record<string, unknown> {
  return schema['~standard'].jsonSchema.input({ target: 'draft-2020-12' });
}

function run(schema: StandardSchemaWithJSON, value: unknown): StandardSchemaV1.Result<unknown> {
  const result = schema['~standard'].validate(value);
  if (result instanceof Promise) throw new Error('expected a synchronous result');
  return result;
}

function issuesOf(schema: StandardSchemaWithJSON, value: unknown): StandardSchemaV1.Issue[] {
  const result = run(schema, value);
  if (result.issues === undefined) throw new Error('expected issues');
  return [...result.issues];
}

function valueOf(schema: StandardSchemaWithJSON, value: unknown): unknown {
  const result = run(schema, value);
  if (result.issues !== undefined) {
    throw new Error(`unexpected issues: ${JSON.stringify(result.issues)}`);
  }
  return result.value;
}

describe('toToolInputSchema: JSON Schema from class-validator metadata', () => {
  it('maps each supported decorator', () => {
    expect(jsonOf(schemaOf(Everything))).toEqual({
      type: 'object',
      properties: {
        name: { type: 'string', minLength: 2, maxLength: 10 },
        score: { type: 'number', minimum: 0, maximum: 100 },
        count: { type: 'integer', exclusiveMinimum: 0 },
        whole: { type: 'integer' },
        flag: { type: 'boolean' },
        note: { type: 'string' },
        choice: { enum: ['a', 'b', 3] },
        color: { enum: ['red', 'green'] },
        level: { enum: [0, 1] },
        tags: {
          type: 'array',
          minItems: 1,
          maxItems: 5,
          items: { type: 'string', maxLength: 20 },
        },
        ids: { type: 'array', minItems: 1, items: { type: 'integer' } },
        title: { type: 'string', minLength: 1 },
        code: { type: 'string', minLength: 3, maxLength: 8 },
        email: { format: 'email' },
        site: { format: 'uri' },
        id: { format: 'uuid' },
        slug: { type: 'string', pattern: '^[a-z]+$' },
        prefixed: { type: 'string', pattern: '^x-' },
        caseless: { type: 'string' },
        meta: { type: 'object' },
        version: { const: 'v1' },
        when: {},
        reason: { type: 'string' },
        anything: {},
        loose: {},
      },
      required: [
        'name',
        'score',
        'count',
        'whole',
        'flag',
        'choice',
        'color',
        'level',
        'tags',
        'ids',
        'title',
        'code',
        'email',
        'site',
        'id',
        'slug',
        'prefixed',
        'caseless',
        'meta',
        'version',
        'when',
        'anything',
      ],
      additionalProperties: false,
    });
  });

  it('marks IsOptional and ValidateIf fields optional and the rest required', () => {
    const json = jsonOf(schemaOf(Everything));
    const required = json.required as string[];
    expect(required).not.toContain('note');
    expect(required).not.toContain('reason');
    expect(required).not.toContain('loose');
    expect(required).toContain('anything');
    expect(required).toContain('name');
  });

  it('inlines nested DTOs, as objects and as array items', () => {
    expect(jsonOf(schemaOf(Person))).toEqual({
      type: 'object',
      properties: {
        name: { type: 'string' },
        address: ADDRESS_SCHEMA,
        previous: { type: 'array', items: ADDRESS_SCHEMA },
      },
      required: ['name', 'address'],
      additionalProperties: false,
    });
  });

  it('refers back to the root for a self-referencing DTO', () => {
    expect(jsonOf(schemaOf(TreeNode))).toEqual({
      type: 'object',
      properties: {
        label: { type: 'string' },
        children: { type: 'array', items: { $ref: '#' } },
      },
      required: ['label'],
      additionalProperties: false,
    });
  });

  it('puts a class that contains itself through another under $defs', () => {
    const folder = {
      type: 'object',
      properties: {
        name: { type: 'string' },
        readme: {
          type: 'object',
          properties: {
            path: { type: 'string' },
            parent: { $ref: '#/$defs/Folder' },
          },
          required: ['path'],
          additionalProperties: false,
        },
      },
      required: ['name'],
      additionalProperties: false,
    };
    expect(jsonOf(schemaOf(Drive))).toEqual({
      type: 'object',
      properties: {
        root: { type: 'object', $ref: '#/$defs/Folder' },
        backup: { $ref: '#/$defs/Folder' },
      },
      required: ['root'],
      additionalProperties: false,
      $defs: { Folder: folder },
    });
  });

  it('refuses a DTO with no decorated properties, naming the class, the tool and the fix', () => {
    // Its every argument would be dropped (whitelist); a tool that takes none omits `input`.
    expect(() => toToolInputSchema(Empty, 'noop')).toThrow(
      new TasksConfigError(
        'Tool "noop": its input class Empty has no class-validator decorator on any property, so every argument would be dropped. Add one to each property (e.g. @IsNumber(), @IsString(), @IsOptional(); @Allow() takes a property unchecked), or drop `input` to receive the arguments as sent.',
      ),
    );
  });

  it('builds the JSON Schema once and hands back the same frozen object', () => {
    const schema = schemaOf(Person);
    const first = jsonOf(schema);
    expect(schema['~standard'].jsonSchema.input({ target: 'draft-07' })).toBe(first);
    expect(schema['~standard'].jsonSchema.output({ target: 'draft-2020-12' })).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen((first.properties as Record<string, object>).address)).toBe(true);
    expect(schema['~standard'].vendor).toBe('nestjs-mcp-tasks');
    expect(schema['~standard'].version).toBe(1);
  });
});

describe('toToolInputSchema: validating arguments against a DTO', () => {
  const person = schemaOf(Person);

  it('returns an instance of the DTO with nested objects converted', () => {
    const value = valueOf(person, validPerson());
    expect(value).toBeInstanceOf(Person);
    const p = value as Person;
    expect(p.address).toBeInstanceOf(Address);
    expect(p.address).toEqual({ street: 'Main St', zip: '12345' });
    expect(p.previous?.[0]).toBeInstanceOf(Address);
    expect(p.name).toBe('Ada');
  });

  it('accepts an omitted optional field', () => {
    const { previous: _previous, ...rest } = validPerson();
    expect((valueOf(person, rest) as Person).previous).toBeUndefined();
  });

  it('names the nested path of a wrong type', () => {
    const input = { ...validPerson(), address: { street: 'Main St', zip: 12345 } };
    const issues = issuesOf(person, input);
    expect(issues).toContainEqual({ message: 'zip must be a string', path: ['address', 'zip'] });
    expect(issues.every((i) => i.path?.join('.') === 'address.zip')).toBe(true);
  });

  it('names array indexes as numbers', () => {
    const input = { ...validPerson(), previous: [{ street: 'Old Rd', zip: 'nope' }] };
    expect(issuesOf(person, input)).toEqual([
      { message: 'zip must match /^\\d{5}$/ regular expression', path: ['previous', 0, 'zip'] },
    ]);
  });

  it('reports missing required fields', () => {
    const issues = issuesOf(person, {});
    expect(issues).toContainEqual({ message: 'name must be a string', path: ['name'] });
    expect(issues).toContainEqual({ message: 'address must be an object', path: ['address'] });
    expect(issues.some((i) => i.path?.[0] === 'previous')).toBe(false);
  });

  it('refuses unknown keys at the top and in nested objects', () => {
    const input = {
      ...validPerson(),
      extra: 1,
      address: { street: 'Main St', zip: '12345', floor: 3 },
    };
    expect(issuesOf(person, input)).toEqual([
      { message: 'property extra should not exist', path: ['extra'] },
      { message: 'property floor should not exist', path: ['address', 'floor'] },
    ]);
  });

  it.each([
    [null, 'null'],
    [[], 'an array'],
    ['{"name":"Ada"}', 'a string'],
    [42, 'a number'],
    [undefined, 'undefined'],
    [true, 'a boolean'],
    [new Date(0), 'an instance of a class'],
  ])('refuses %p as arguments', (value, described) => {
    expect(issuesOf(person, value)).toEqual([
      { message: `Expected an object of arguments, got ${described}`, path: [] },
    ]);
  });

  it('refuses __proto__ from JSON.parse without polluting Object.prototype', () => {
    const input: unknown = JSON.parse(
      '{"__proto__": {"polluted": true}, "name": "Ada", "address": {"street": "s", "zip": "12345"}}',
    );
    expect(issuesOf(person, input)).toEqual([
      { message: 'property __proto__ is not allowed', path: ['__proto__'] },
    ]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('refuses nested __proto__ and constructor keys', () => {
    const input: unknown = JSON.parse(
      '{"name": "Ada", "address": {"street": "s", "zip": "12345",' +
        ' "__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}}',
    );
    expect(issuesOf(person, input)).toEqual([
      { message: 'property __proto__ is not allowed', path: ['address', '__proto__'] },
      { message: 'property constructor is not allowed', path: ['address', 'constructor'] },
    ]);
    expect(Object.prototype).not.toHaveProperty('polluted');
    expect(Address.prototype).not.toHaveProperty('polluted');
  });

  it('validates recursive DTOs all the way down', () => {
    const tree = schemaOf(TreeNode);
    const value = valueOf(tree, {
      label: 'a',
      children: [{ label: 'b', children: [{ label: 'c' }] }],
    });
    expect((value as TreeNode).children?.[0]?.children?.[0]).toBeInstanceOf(TreeNode);
    expect(issuesOf(tree, { label: 'a', children: [{ label: 'b', children: [{}] }] })).toEqual([
      { message: 'label must be a string', path: ['children', 0, 'children', 0, 'label'] },
    ]);
  });

  it('runs async constraints, answering with a promise', async () => {
    const signUp = schemaOf(SignUp);
    const taken = signUp['~standard'].validate({ username: 'taken' });
    expect(taken).toBeInstanceOf(Promise);
    expect(await taken).toEqual({ issues: [{ message: 'username is taken', path: ['username'] }] });
    const free = await signUp['~standard'].validate({ username: 'free' });
    expect(free.issues).toBeUndefined();
    expect((free as { value: unknown }).value).toBeInstanceOf(SignUp);
  });

  it('checks every decorator, reflected in the schema or not', () => {
    const everything = schemaOf(Everything);
    const valid = {
      name: 'ab',
      score: 50,
      count: 1,
      whole: 2,
      flag: false,
      choice: 3,
      color: 'red',
      level: 1,
      tags: ['t'],
      ids: [1],
      title: 't',
      code: 'abc',
      email: 'a@example.com',
      site: 'https://example.com',
      id: '123e4567-e89b-42d3-a456-426614174000',
      slug: 'abc',
      prefixed: 'x-1',
      caseless: 'ABC',
      meta: {},
      version: 'v1',
      when: '2026-07-28',
      anything: 0,
    };
    expect(valueOf(everything, valid)).toBeInstanceOf(Everything);
    expect(issuesOf(everything, { ...valid, caseless: 'abd', title: '' })).toEqual([
      { message: 'title should not be empty', path: ['title'] },
      { message: 'caseless must match /^abc$/i regular expression', path: ['caseless'] },
    ]);
    expect(issuesOf(everything, { ...valid, flag: true })).toEqual([
      { message: 'reason must be a string', path: ['reason'] },
    ]);
  });
});

describe('toToolInputSchema: Standard Schemas and bad input', () => {
  it('takes the arguments as sent for no input: an open object, checked for forbidden keys', () => {
    const open = toToolInputSchema(undefined, 'tool');
    expect(jsonOf(open)).toEqual({ type: 'object' });
    const args = { a: 2, b: { c: [3] } };
    expect(valueOf(open, args)).toBe(args);
    expect(issuesOf(open, JSON.parse('{"a": {"__proto__": {}}}'))).toEqual([
      { message: 'property __proto__ is not allowed', path: ['a', '__proto__'] },
    ]);
    expect(issuesOf(open, [1])).toEqual([
      { message: 'Expected an object of arguments, got an array', path: [] },
    ]);
  });

  it('passes a zod object schema through unchanged', () => {
    const schema = z.object({ a: z.number() });
    expect(toToolInputSchema(schema, 'tool')).toBe(schema);
    expect(isStandardSchema(schema)).toBe(true);
    const json = schema['~standard'].jsonSchema.input({ target: 'draft-2020-12' });
    expect(json).toMatchObject({
      type: 'object',
      properties: { a: { type: 'number' } },
      required: ['a'],
    });
  });

  it('refuses a Standard Schema without JSON Schema, naming the tool', () => {
    const bare = {
      '~standard': { version: 1, vendor: 'x', validate: (value: unknown) => ({ value }) },
    };
    expect(isStandardSchema(bare)).toBe(false);
    expect(() => toToolInputSchema(bare as never, 'summarize')).toThrow(
      new TasksConfigError(
        'Tool "summarize": input must be a class-validator DTO class or a Standard Schema with JSON Schema (for example a zod object); this schema has no JSON Schema',
      ),
    );
  });

  it('refuses a JSON Schema carrier without a validate function', () => {
    const noValidate = {
      '~standard': {
        version: 1,
        vendor: 'x',
        jsonSchema: { input: () => ({}), output: () => ({}) },
      },
    };
    expect(() => toToolInputSchema(noValidate as never, 'summarize')).toThrow(
      /^Tool "summarize": .*; this schema has no validate function$/,
    );
  });

  function plainFunction(): void {}

  it.each([
    ['a number', 42],
    ['a string', 'Person'],
    ['a plain object', { type: 'object' }],
    ['null', null],
    ['an arrow function', () => ({})],
    ['a plain function', plainFunction],
    ['a built-in class', Date],
    ['a DTO instance', new Person()],
  ])('refuses %s, naming the tool and the value', (_label, value) => {
    let error: unknown;
    try {
      toToolInputSchema(value as never, 'my-tool');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(TasksConfigError);
    expect((error as Error).message).toBe(
      'Tool "my-tool": input must be a class-validator DTO class or a Standard Schema with JSON Schema' +
        ` (for example a zod object); got ${show(value)}`,
    );
  });

  it('recognises Standard Schemas with JSON Schema only', () => {
    expect(isStandardSchema(schemaOf(Person))).toBe(true);
    expect(isStandardSchema(Person)).toBe(false);
    expect(isStandardSchema(null)).toBe(false);
    expect(isStandardSchema({ '~standard': null })).toBe(false);
    const callable = Object.assign(() => undefined, {
      '~standard': {
        version: 1,
        vendor: 'x',
        validate: (value: unknown) => ({ value }),
        jsonSchema: { input: () => ({}), output: () => ({}) },
      },
    });
    expect(isStandardSchema(callable)).toBe(true);
    expect(toToolInputSchema(callable as never, 'tool')).toBe(callable);
  });
});

describe('toToolInputSchema with the MCP SDK', () => {
  it('is accepted by McpServer.registerTool', () => {
    const server = new McpServer({ name: 't', version: '1' });
    const schema = schemaOf(Person);
    expect(() =>
      server.registerTool('t', { inputSchema: schema }, () => ({ content: [] })),
    ).not.toThrow();
  });

  it('publishes the schema in tools/list and validates tools/call arguments', async () => {
    const server = new McpServer({ name: 't', version: '1' });
    const seen: unknown[] = [];
    server.registerTool('greet', { inputSchema: schemaOf(Person) }, (args) => {
      seen.push(args);
      return { content: [{ type: 'text', text: `hello ${(args as Person).name}` }] };
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const client = new Client({ name: 'c', version: '1' });
    await server.connect(serverSide);
    await client.connect(clientSide);
    try {
      const { tools } = await client.listTools();
      expect(tools.find((t) => t.name === 'greet')?.inputSchema).toEqual(jsonOf(schemaOf(Person)));

      const ok = await client.callTool({ name: 'greet', arguments: validPerson() });
      expect(ok.content).toEqual([{ type: 'text', text: 'hello Ada' }]);
      expect(seen[0]).toBeInstanceOf(Person);

      const bad = await client
        .callTool({ name: 'greet', arguments: { name: 'Ada', address: { zip: 1 } } })
        .then(
          (result) => JSON.stringify(result),
          (error: unknown) => String(error),
        );
      expect(bad).toContain('address.street: street must be a string');
      expect(seen).toHaveLength(1);
    } finally {
      await client.close();
      await server.close();
    }
  });
});
