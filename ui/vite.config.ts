import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// `npm run dev` proxies the API to a running `fluxo serve` (FLUXO_URL, default
// http://127.0.0.1:8787), so the page and the API share one origin as in production.
const target = process.env.FLUXO_URL ?? 'http://127.0.0.1:8787';

export default defineConfig({
  plugins: [react()],
  // Relative asset URLs: the same build works under `fluxo serve` and in the Tauri window.
  base: './',
  server: {
    proxy: {
      '/api': { target, changeOrigin: true },
      '/healthz': { target, changeOrigin: true },
    },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 2000,
  },
});
