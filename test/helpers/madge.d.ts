// The part of madge's API (8.x, which ships no types) that test/unit/import-graph.test.ts uses.
declare module 'madge' {
  interface MadgeConfig {
    readonly fileExtensions?: readonly string[];
    readonly tsConfig?: string;
  }
  interface MadgeResult {
    /** Each file, relative to the base folder, and the files it imports. */
    obj(): Record<string, string[]>;
    warnings(): { skipped: string[] };
    circular(): string[][];
  }
  export default function madge(path: string | readonly string[], config?: MadgeConfig): Promise<MadgeResult>;
}
