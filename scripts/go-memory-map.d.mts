// Types of go-memory-map.mjs, for the tests that import it.
export declare const SOURCE: string;
export declare const TARGET: string;
export declare const RECORD_SOURCE: string;
export declare const RECORD_GO: string;
export declare const RECORD_C: string;
export interface MapConstant {
  name: string;
  value: number;
  doc: string[];
}
export declare function memoryMap(source?: string): Promise<MapConstant[]>;
export declare function render(constants: MapConstant[], source?: string, about?: string[]): string;
export declare function renderC(constants: MapConstant[], source?: string): string;
/** Every file the generator writes, and what it holds now: [path, text]. */
export declare function outputs(): Promise<[string, string][]>;
