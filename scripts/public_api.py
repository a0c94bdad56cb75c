#!/usr/bin/env python3
"""Counts the crate's public API from rustdoc JSON: items reachable through public paths.

Usage: RUSTC_BOOTSTRAP=1 cargo rustdoc --no-default-features --lib -- -Z unstable-options \
  --output-format json && python3 scripts/public_api.py target/doc/bevy_generative_agents.json [list]
"""
import json,sys,collections
d=json.load(open(sys.argv[1]))
idx=d['index']; root=d['root']
seen=set(); kinds=collections.Counter(); names=[]
def kind(it): return next(iter(it['inner'])) if isinstance(it['inner'],dict) else it['inner']
def visit(i,path):
    i=str(i)
    if i in seen or i not in idx: return
    it=idx[i]
    if it.get('crate_id',0)!=0: return
    seen.add(i); k=kind(it); inner=it['inner'][k]
    p=path+([it['name']] if it.get('name') else [])
    if k not in ('use','impl'): kinds[k]+=1; names.append(('::'.join(p),k))
    if k=='module':
        for c in inner['items']:
            ci=idx.get(str(c))
            if ci and (ci['visibility']=='public'): visit(c,p)
    elif k=='use':
        if inner.get('id') is not None:
            tgt=idx.get(str(inner['id']))
            if inner['is_glob'] and tgt and kind(tgt)=='module':
                for c in tgt['inner']['module']['items']:
                    ci=idx.get(str(c))
                    if ci and ci['visibility']=='public': visit(c,path)
            else: visit(inner['id'],path)
    elif k in ('struct','enum','union','trait'):
        if k=='struct':
            kk=inner['kind']
            if isinstance(kk,dict) and 'plain' in kk:
                for f in kk['plain']['fields']:
                    if idx[str(f)]['visibility']=='public': visit(f,p)
            elif isinstance(kk,dict) and 'tuple' in kk:
                for f in kk['tuple']:
                    if f is not None and idx[str(f)]['visibility']=='public': visit(f,p)
        if k=='enum':
            for v in inner['variants']: visit(v,p)
        if k=='trait':
            for c in inner['items']: visit(c,p)
        for im in inner.get('impls',[]):
            imi=idx.get(str(im))
            if not imi: continue
            imp=imi['inner']['impl']
            if imp.get('trait') is None and not imp.get('is_synthetic') and not imp.get('blanket_impl'):
                for c in imp['items']:
                    ci=idx[str(c)]
                    if ci['visibility']=='public': visit(c,p)
visit(root,[])
print(sum(kinds.values()),dict(kinds))
if len(sys.argv)>2:
    for n,k in sorted(names): print(k,n)
