// Build config: the API serves dist/ at "/"; during development `npm run dev` proxies the API.
import { defineConfig } from "vitest/config";

const api = process.env.ROLLOUT_URL ?? "http://127.0.0.1:8000";

export default defineConfig({
  base: "/",
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", chunkSizeWarningLimit: 300 },
  server: {
    proxy: {
      "/api": { target: api, ws: true, changeOrigin: true },
      "/openapi.json": { target: api, changeOrigin: true },
    },
  },
  test: { include: ["tests/**/*.test.ts"], environment: "node" },
});
