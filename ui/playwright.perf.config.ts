import { defineConfig } from '@playwright/test';
import base from './playwright.config';

// Frame-time measurement with a 300-step workflow (prints numbers; never fails on timing).
export default defineConfig({
  ...base,
  testMatch: '**/*.perf.ts',
  timeout: 180_000,
  use: { ...base.use, trace: 'off', screenshot: 'off' },
});
