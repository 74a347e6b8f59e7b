import * as ai from 'ai6';
import { aiSdkSystem } from './aiSdk.mjs';

export const label = 'Vercel AI SDK 6';
export const packages = ['ai6'];
export const { loop, fanout, stream } = aiSdkSystem(ai, 'v3');
