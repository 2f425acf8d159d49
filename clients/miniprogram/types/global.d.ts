/// <reference types="@tarojs/taro" />

declare const SLOTWHEEL_API_BASE: string;

declare namespace NodeJS {
  interface ProcessEnv {
    TARO_ENV: "weapp" | "h5";
  }
}
declare const process: { env: NodeJS.ProcessEnv };

declare module "*.png";
declare module "*.css";
