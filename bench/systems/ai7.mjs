import * as ai from 'ai7';
import { aiSdkSystem } from './aiSdk.mjs';

export const label = 'Vercel AI SDK 7';
export const packages = ['ai7'];
export const { loop, fanout, stream } = aiSdkSystem(ai, 'v4');
