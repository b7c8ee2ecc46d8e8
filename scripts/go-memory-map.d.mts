// Types of go-memory-map.mjs, for the tests that import it.
export declare const SOURCE: string;
export declare const TARGET: string;
export interface MapConstant {
  name: string;
  value: number;
  doc: string[];
}
export declare function memoryMap(source?: string): Promise<MapConstant[]>;
export declare function render(constants: MapConstant[]): string;
