/** The messages of TasksConfigErrors about how the module is wired into an app, in one place. */

const REGISTER_ONCE =
  'Register it once, in the root module (TasksModule.forRoot() or forRootAsync()); feature ' +
  'modules inject TasksService and the TaskStore token directly (the registration is global) ' +
  'or import bare TasksModule.';

export const registeredTwice = (count: number): string =>
  `TasksModule is registered ${count} times in this app; it serves one MCP endpoint and one ` +
  `store per app. ${REGISTER_ONCE} (Importing the same DynamicModule object in several modules ` +
  `counts as one registration.)`;

export const neverRegistered = (): string =>
  'TasksModule is imported but never registered in this app: add TasksModule.forRoot() (or ' +
  "forRootAsync()) once, to the root module's imports.";

export const notGlobal = (): string =>
  'A module imports bare TasksModule, but the registration was made with isGlobal: false, so ' +
  'its providers are not visible there. Drop isGlobal: false (registrations are global by ' +
  'default), or keep the forRoot() result in a constant and import that same DynamicModule ' +
  'object in each module that needs TasksService.';

export const guardNotBuilt = (name: string, cause: string, key = 'guards'): string =>
  `${key}: ${name} cannot be built (${cause}). Provide it in the app (e.g. in your AuthModule, ` +
  'next to what it injects), or make its dependencies reachable from TasksModule: a global ' +
  'module, APP_GUARD for an app-wide guard, or forRootAsync({ imports: [TheirModule] }).';
