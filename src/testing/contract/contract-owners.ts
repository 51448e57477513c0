/** The owners the contract rules write as: principals without a tenant, and alice in tenant t1. */
import type { TaskOwner } from '../../entries/store.js';

export const alice: TaskOwner = { principal: 'alice', tenant: null };
export const aliceOfTenant: TaskOwner = { principal: 'alice', tenant: 't1' };
export const bob: TaskOwner = { principal: 'bob', tenant: null };
export const carol: TaskOwner = { principal: 'carol', tenant: null };
